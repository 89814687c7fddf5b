//! One accepted connection: its first bytes tell an iperf3 client from a
//! linerate one; a linerate control connection goes to its session (past
//! the per-address limit on handshakes), a data connection to its test's
//! route. The crr pool may have read a connection's first bytes already
//! ([`ReadAhead`]): they are read first.

use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use crate::control::read_first_frame;
use crate::guard::{self, SourceSlot};
use crate::iperf3::server as iperf3_server;
use linerate_engine::read_ahead::ReadAhead;
use linerate_proto::wire::{classify_greeting, DataHello, Greeting, Message, RefuseCode};

use super::{run_control, Route, Shared};

/// One accepted connection, on a thread of its own: its first byte tells
/// iperf3 from linerate; a linerate one's first frame opens a control
/// session or routes a data connection. `seq`: the connection's place in
/// the accept order.
/// `first_bytes`: the connection's place among those its address holds
/// before saying what they are, given back once its first frame (or
/// iperf3 cookie) is read.
pub(super) fn handle_connection(
    mut conn: ReadAhead,
    peer: SocketAddr,
    seq: u64,
    first_bytes: SourceSlot,
    shared: &Shared,
) {
    // The handshake timeout bounds everything before admission, from here:
    // the first frame, the key's exchange and the Hello together.
    let started = Instant::now();
    let log = &shared.guard.log;
    let greeting_timeout = shared.limits.handshake();
    if let Err(e) = conn.sock().set_read_timeout(Some(greeting_timeout)) {
        log.log(format_args!("{peer}: {e}"));
        return;
    }
    // The first byte: read ahead by the crr pool, or peeked (left for the
    // greeting's read).
    let mut first = [0u8; 1];
    match conn.head().first() {
        Some(&b) => first[0] = b,
        None => match conn.sock().peek(&mut first) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                log.log(format_args!("{peer}: no greeting: {e}"));
                return;
            }
        },
    }
    let greeting = classify_greeting(&first);
    match greeting {
        Greeting::Native => {}
        Greeting::Iperf3 => {
            serve_iperf3(conn, peer, seq, started, first_bytes, shared);
            return;
        }
        Greeting::Unknown | Greeting::NeedMore => {
            log.log(format_args!(
                "{peer}: not a linerate or iperf3 peer (first byte {:#04x}), closing",
                first[0]
            ));
            return;
        }
    }
    let left = greeting_timeout.saturating_sub(started.elapsed());
    let first_frame = read_first_frame(&mut conn, left);
    drop(first_bytes);
    let (msg, mut raw) = match first_frame {
        Ok(x) => x,
        Err(e) => {
            log.log(format_args!("{peer}: bad first frame: {}", e.chain()));
            // Answer a Hello-shaped mistake in words the client can print.
            let _ = reply_refusal(conn.sock(), RefuseCode::Invalid, &e.to_string());
            return;
        }
    };
    // What the crr pool read past the first frame (a conforming peer waits
    // for the server's answer, so usually nothing).
    let (sock, rest) = conn.into_parts();
    match msg {
        Message::Hello(_) | Message::AuthInit(_) => {
            if let Some(pre_auth) = take_pre_auth(&sock, peer, shared) {
                // The session takes the bytes past its first frame next.
                raw.extend_from_slice(&rest);
                run_control(sock, peer, started, &raw, pre_auth, shared);
                // The test and its stream threads are gone (joined when
                // its run dropped): what they freed goes back.
                linerate_engine::memory::release_freed();
            }
        }
        Message::DataHello(h) => route_data(h, sock, &rest, peer, shared),
        other => log.log(format_args!(
            "{peer}: unexpected first frame {}, closing",
            other.name()
        )),
    }
}

/// An iperf3 client's connection: served by the iperf3 server with this
/// server's limits, engine and guard.
fn serve_iperf3(
    conn: ReadAhead,
    peer: SocketAddr,
    seq: u64,
    started: Instant,
    first_bytes: SourceSlot,
    shared: &Shared,
) {
    let host = iperf3_server::Host {
        limits: &shared.limits,
        engine: shared.engine,
        format: shared.format,
        quiet: shared.quiet,
        out: shared.out.as_ref(),
        cpus: &shared.cpus,
        per_thread_cpu: shared.per_thread_cpu,
        test_ended: &shared.test_ended,
        hub: &shared.iperf3,
        guard: &shared.guard,
        metrics: &shared.metrics,
        json_lines: shared.json_lines.as_ref(),
        auth_required: shared.auth_key.is_some(),
        rate_budget: shared.rate_budget.as_ref(),
        stop_signal: shared.stop_signal(),
    };
    iperf3_server::handle(conn, peer, seq, started, first_bytes, &host);
    // The test's threads are joined: what they freed goes back.
    linerate_engine::memory::release_freed();
}

/// A data connection: to its test's session, or (crr) one transaction for
/// the crr side; refused unless it comes from the address that opened the
/// test's control connection. `rest`: what the crr pool read past its
/// greeting — a crr transaction's request, which the transaction reads
/// first; a stream sends nothing before its test starts, so a stream
/// whose peer did is refused (its bytes would otherwise be dropped
/// uncounted).
fn route_data(h: DataHello, sock: TcpStream, rest: &[u8], peer: SocketAddr, shared: &Shared) {
    let log = &shared.guard.log;
    let route = shared
        .routes
        .lock()
        .ok()
        .and_then(|r| r.get(&h.token).cloned());
    // No reflection: a test's data connections come from the address that
    // opened its control connection, or not at all.
    let owner = route.as_ref().map(|(owner, _)| *owner);
    if let Some(Err(why)) = owner.map(|o| guard::data_from_owner(o, peer, "data connection")) {
        return log.log(format_args!("{why}"));
    }
    // A crr transaction's request follows its greeting; a stream (a load
    // stream too) sends nothing before its test starts.
    let transaction = matches!(&route, Some((_, Route::Crr(c, _))) if !c.is_load(&h));
    if !rest.is_empty() && !transaction {
        return log.log(format_args!(
            "{peer}: data connection {} sent {} bytes before its test started, closing",
            h.stream,
            rest.len()
        ));
    }
    match route {
        Some((_, Route::Streams(tx))) => {
            let _ = tx.send((h, sock));
        }
        Some((_, Route::Crr(crr, tx))) if crr.is_load(&h) => {
            let _ = tx.send((h, sock));
        }
        Some((_, Route::Crr(crr, _))) => {
            if let Err(e) = crr.serve(&h, sock, rest) {
                log.log(format_args!("{peer}: crr transaction: {e}"));
            }
        }
        None => log.log(format_args!(
            "{peer}: data connection for no running test, closing"
        )),
    }
}

fn reply_refusal(mut sock: &TcpStream, code: RefuseCode, why: &str) -> std::io::Result<()> {
    use std::io::Write;
    let msg = Message::Refuse(linerate_proto::wire::Refuse {
        code,
        message: why.to_owned(),
    });
    sock.write_all(&linerate_proto::wire::to_bytes(&msg))
}

/// A place among the control connections `peer`'s address has before
/// admission ([`guard::PerSource`]), or a refusal: one host cannot hold the
/// server's connection threads with handshakes it never completes.
fn take_pre_auth(sock: &TcpStream, peer: SocketAddr, shared: &Shared) -> Option<SourceSlot> {
    let pre_auth = &shared.guard.pre_auth;
    let slot = pre_auth.try_take(peer.ip());
    if slot.is_none() {
        shared.metrics.limit_hit("pre_auth_per_source");
        let max = pre_auth.max();
        shared.guard.log.log(format_args!(
            "{}: {max} connections not authenticated yet (the most one address may have), closing another",
            peer.ip()
        ));
        let _ = reply_refusal(
            sock,
            RefuseCode::Busy,
            &format!(
                "{max} connections from {} are not authenticated yet, this server allows {max} at a time; try again when they are done",
                peer.ip()
            ),
        );
    }
    slot
}
