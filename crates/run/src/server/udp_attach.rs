//! UDP streams of a native test on the server: one data socket per planned
//! stream bound before Accept, and the greetings that attach them (only from
//! the control connection's peer, so the server cannot be made to send test
//! traffic elsewhere).

use crate::error::{Context as _, Result};
use linerate_engine::udp;
use linerate_proto::spec::{StreamPlan, TestSpec};
use linerate_proto::wire::{self, Message};
use std::time::Instant;

use super::ServerTest;
use crate::control::ControlConn;

/// A UDP data socket waiting for its client's greeting.
pub(super) struct PendingDatagram {
    pub(super) plan: StreamPlan,
    pub(super) sock: std::net::UdpSocket,
    /// The greeting accepted (re-echoed if the client repeats it).
    greeting: Option<Vec<u8>>,
}

impl ServerTest<'_> {
    /// UDP: one socket per planned stream on the control connection's local
    /// address; returns their ports in plan order.
    pub(super) fn bind_datagrams(
        &mut self,
        spec: &TestSpec,
        ctrl: &ControlConn,
    ) -> Result<Vec<u16>> {
        let local = ctrl
            .local_addr()
            .context("control connection address")?
            .ip();
        let window = spec.udp.as_ref().and_then(|u| u.window);
        let mut ports = Vec::new();
        // The load streams (rr under load) are TCP connections.
        for plan in spec.stream_plan().into_iter().filter(|p| !p.load) {
            let sock = udp::bind(local)?;
            if let Some(w) = window {
                let note = udp::set_buffers(&sock, w)?;
                if plan.id == 1 {
                    self.notes.push(format!("server: {note}"));
                }
            }
            ports.push(sock.local_addr()?.port());
            self.udp_pending.push(PendingDatagram {
                plan,
                sock,
                greeting: None,
            });
        }
        Ok(ports)
    }

    /// UDP: reads pending greetings; attaches the streams they name. Any
    /// other datagram on a data port before Start is ignored.
    pub(super) fn poll_greetings(&mut self) {
        let mut buf = [0u8; 128];
        for i in 0..self.udp_pending.len() {
            // Bounded per call so a flood cannot hold the control loop.
            for _ in 0..64 {
                let Some((n, from)) = udp::poll_greeting(&self.udp_pending[i].sock, &mut buf)
                else {
                    break;
                };
                if let Err(stray) = udp::from_client(from, self.peer_ip) {
                    // No reflection: only the control connection's peer may
                    // attach a stream (and so receive what it sends).
                    self.shared.guard.log.log(format_args!("{stray}"));
                    continue;
                }
                let bytes = &buf[..n];
                let p = &mut self.udp_pending[i];
                if let Some(g) = &p.greeting {
                    // The client did not get our echo: repeat it.
                    if g.as_slice() == bytes {
                        let _ = p.sock.send(bytes);
                    }
                    continue;
                }
                let hello = match wire::decode(bytes) {
                    Ok(Some((Message::DataHello(h), used))) if used == n => h,
                    _ => continue,
                };
                if hello.stream != p.plan.id {
                    self.shared.guard.log.log(format_args!(
                        "greeting for stream {} on stream {}'s port from {from}, ignored",
                        hello.stream, p.plan.id
                    ));
                    continue;
                }
                match self.session.stream_attached(&hello, Instant::now()) {
                    Ok(_) => {
                        let engine = self.engine();
                        let spec = self.session.spec().cloned().unwrap_or_default();
                        let p = &mut self.udp_pending[i];
                        if let Err(e) = udp::accept_greeting(&p.sock, from, bytes) {
                            self.session
                                .stream_failed(format!("stream {}: {e}", p.plan.id));
                            return;
                        }
                        // Connected now, so its route and peer are known;
                        // done before this turn ends, so before the Start
                        // the last stream's attachment queued is written.
                        crate::test_type::server_udp_socket(engine, &spec, &p.plan, &p.sock);
                        p.greeting = Some(bytes.to_vec());
                        // The peer sends data only after Start.
                        udp::drop_queued(&p.sock);
                    }
                    Err(why) => self
                        .shared
                        .guard
                        .log
                        .log(format_args!("rejected a UDP greeting from {from}: {why}")),
                }
            }
        }
    }
}
