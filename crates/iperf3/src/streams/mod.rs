//! iperf3's UDP data streams on linerate's engines: the stream handshake
//! on iperf3's port ([`udp_listener`], [`udp_accept`]) and the stream
//! format the ordinary runner is started with for iperf3 tests
//! ([`Iperf3Streams`], given to `linerate_engine::runner::start_with`:
//! threads, interval records, CPU accounting, stop and drain signals are
//! the runner's as for any test).
//!
//! The datagrams carry iperf3's header ([`crate::udp`]: send time,
//! sequence number from 1, 32 or 64 bits). The receiver keeps two accounts
//! of every stream side by side: linerate's exact one
//! ([`linerate_proto::seq`]: distinct received, duplicates, reordered) and
//! iperf3's own rules ([`crate::udp::Iperf3Receiver`]), which is what an
//! iperf3 peer must be sent; the latter travels in
//! [`UdpRecv::iperf3`](linerate_proto::measure::UdpRecv::iperf3).
//!
//! Sending is the engine's native UDP loop and sans-IO sender core with
//! iperf3's datagram format ([`Iperf3Datagrams`](crate::udp::Iperf3Datagrams)); receiving is this
//! module's loop (`recv`), built on the engine's receive building blocks
//! and generic over the engine as the native receive loop is: with the
//! `batch` engine many datagrams per `sendmmsg`/`recvmmsg`, with UDP
//! GSO/GRO where it has them on (a GRO super-buffer is cut at the kernel's
//! segment size and every datagram still goes through both accounts one by
//! one); with `syscall` one call per datagram. The stream's report says
//! what the engine did (its batching summary: messages and datagrams per
//! call, GSO, GRO).

mod recv;
#[cfg(test)]
mod tests;

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use linerate_engine::udp;
use linerate_engine::EngineError;

use crate::udp as wire;

pub use recv::Iperf3Streams;

/// The UDP socket an iperf3 server listens on for connect datagrams: the
/// control connection's local address and the server's port, with
/// SO_REUSEPORT (each accepted stream keeps the port, connected to its
/// client, while a fresh socket takes the next client). Not SO_REUSEADDR:
/// with it, another local user could bind the same address and take the
/// next connect datagram, and with it a stream; the kernel lets only this
/// process's uid join a SO_REUSEPORT group, and a connected member still
/// gets its client's datagrams first.
pub fn udp_listener(local: SocketAddr) -> Result<UdpSocket, EngineError> {
    let local = linerate_engine::socket::canonical(local);
    let domain = socket2::Domain::for_address(local);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
        .map_err(|e| EngineError::io("UDP socket", e))?;
    s.set_reuse_port(true)
        .map_err(|e| EngineError::io("SO_REUSEPORT", e))?;
    s.bind(&local.into())
        .map_err(|e| EngineError::io(format!("bind UDP {local}"), e))?;
    Ok(s.into())
}

/// A UDP socket that holds the server's `port` for its whole life, so
/// that no other socket on the host (an ephemeral one, picked by the
/// kernel for some other program) takes the port between iperf3 tests:
/// an iperf3 UDP test needs it, and with it taken the test failed with
/// "unable to accept stream connection". Bound to the wildcard address
/// (dual-stack where the host has IPv6) with SO_REUSEPORT, so each
/// test's [`udp_listener`] on the control connection's own address binds
/// beside it and, being the more specific address, gets the connect
/// datagrams; this socket is never read, and its receive buffer is the
/// least the kernel allows. `None` where neither family can bind it (the
/// tests then bind their listener as before).
pub fn udp_port_hold(port: u16) -> Option<UdpSocket> {
    let bind = |local: SocketAddr| -> std::io::Result<UdpSocket> {
        let domain = socket2::Domain::for_address(local);
        let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        if local.is_ipv6() {
            s.set_only_v6(false)?;
        }
        s.set_reuse_port(true)?;
        // Datagrams to an address no test listens on queue here, unread:
        // as few as the kernel allows.
        s.set_recv_buffer_size(1)?;
        s.bind(&local.into())?;
        Ok(s.into())
    };
    bind(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| bind(SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port))))
        .ok()
}

/// What [`udp_accept`] found.
#[derive(Debug)]
pub enum UdpAccepted {
    /// The client's connect datagram: the old listener, now connected to
    /// the client, is the stream's socket; `next` takes the next stream.
    Stream { stream: UdpSocket, next: UdpSocket },
    /// No connect datagram from the client yet: the listener, still open
    /// for it. Datagrams from other addresses were dropped; `stray` names
    /// the last, for the caller's (throttled) log.
    Waiting {
        listener: UdpSocket,
        stray: Option<udp::NotTheClient>,
    },
}

/// Datagrams from other addresses read (and dropped) per call at most, so
/// a flood cannot hold the caller past `wait` by much.
const STRAYS_PER_CALL: usize = 64;

/// Waits up to `wait` for a connect datagram on `listener` from `client`
/// (the control connection's peer: [`udp::from_client`], the rule native
/// greetings follow too; anyone else's is dropped, so no third host can
/// be made the target of a reverse test). On one, connects `listener` to
/// that client (it becomes the stream's socket) and drops what was queued
/// before, opens the next listener on the same address, then replies
/// "6789" — in that order, so the next client's datagram always finds a
/// socket.
pub fn udp_accept(
    listener: UdpSocket,
    client: IpAddr,
    wait: Duration,
) -> Result<UdpAccepted, EngineError> {
    let deadline = Instant::now() + wait;
    let mut stray = None;
    let mut buf = [0u8; 64];
    for _ in 0..STRAYS_PER_CALL {
        let left = deadline.saturating_duration_since(Instant::now());
        listener
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|e| EngineError::io("UDP read timeout", e))?;
        let peer = match listener.recv_from(&mut buf) {
            Ok((_, peer)) => peer,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                break
            }
            Err(e) => return Err(EngineError::io("UDP connect datagram", e)),
        };
        match udp::from_client(peer, client) {
            Ok(()) => return connect_stream(listener, peer),
            Err(s) => stray = Some(s),
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    Ok(UdpAccepted::Waiting { listener, stray })
}

/// The client's connect datagram came from `peer`: see [`udp_accept`].
fn connect_stream(listener: UdpSocket, peer: SocketAddr) -> Result<UdpAccepted, EngineError> {
    let local = listener
        .local_addr()
        .map_err(|e| EngineError::io("UDP local address", e))?;
    listener
        .connect(peer)
        .map_err(|e| EngineError::io(format!("connect UDP to {peer}"), e))?;
    udp::drop_queued(&listener);
    let next = udp_listener(local)?;
    listener
        .send(&wire::REPLY)
        .map_err(|e| EngineError::io("UDP connect reply", e))?;
    Ok(UdpAccepted::Stream {
        stream: listener,
        next,
    })
}

/// Shuts down the read side of a TCP stream: a receiver blocked in read
/// sees end of stream and ends cleanly (iperf3 ends receivers at TEST_END,
/// not at the peer's close).
pub fn end_tcp_receiver(sock: &TcpStream) {
    let _ = sock.shutdown(std::net::Shutdown::Read);
}
