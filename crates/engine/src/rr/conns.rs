//! An rr test's attached connections, sorted into flows × phases and load
//! streams by the plan's numbering.

use std::net::{TcpStream, UdpSocket};

use linerate_proto::rr_core::RrPlan;
use linerate_proto::spec::RrConn;

use crate::runner::{DataSocket, StreamSetup};
use crate::EngineError;

/// A flow's socket for one phase.
#[derive(Debug)]
pub(super) enum Conn {
    Tcp(TcpStream),
    /// Connected to the peer's socket of the same (phase, flow).
    Udp(UdpSocket),
}

/// An rr test's connections, sorted by what they carry.
#[derive(Debug, Default)]
pub struct RrConns {
    /// `flows[f][phase]`.
    pub(super) flows: Vec<Vec<Conn>>,
    pub(super) load: Vec<(u32, TcpStream)>,
}

impl RrConns {
    /// True when the flows' sockets are UDP (rr over UDP).
    pub(super) fn datagrams(&self) -> bool {
        self.flows
            .iter()
            .flatten()
            .next()
            .is_some_and(|c| matches!(c, Conn::Udp(_)))
    }

    /// crr's attached connections: its load streams only (each
    /// transaction opens its own connection).
    pub fn load_only(plan: &RrPlan, streams: Vec<StreamSetup>) -> Result<RrConns, EngineError> {
        let load = streams
            .into_iter()
            .map(|s| match (plan.conn(s.id), s.sock) {
                (Some(RrConn::Load { .. }), DataSocket::Tcp(sock)) => Ok((s.id, sock)),
                _ => Err(EngineError::Protocol(format!(
                    "connection {} is not a load stream of this crr test",
                    s.id
                ))),
            })
            .collect::<Result<_, _>>()?;
        Ok(RrConns {
            flows: Vec::new(),
            load,
        })
    }

    /// Sorts the attached connections using the plan's numbering; every
    /// (phase, flow) must be present.
    pub fn sort(plan: &RrPlan, streams: Vec<StreamSetup>) -> Result<RrConns, EngineError> {
        let phases = plan.phases.len();
        let flows = plan.flows.max(1) as usize;
        let mut grid: Vec<Vec<Option<Conn>>> = (0..flows)
            .map(|_| (0..phases).map(|_| None).collect())
            .collect();
        let mut load = Vec::new();
        for s in streams {
            let conn = match s.sock {
                DataSocket::Tcp(t) => Conn::Tcp(t),
                DataSocket::Udp(u) => Conn::Udp(u),
            };
            match (plan.conn(s.id), conn) {
                (Some(RrConn::Flow { phase, flow }), conn) => {
                    if let Some(slot) = grid
                        .get_mut(flow as usize)
                        .and_then(|f| f.get_mut(phase as usize))
                    {
                        *slot = Some(conn);
                    }
                }
                (Some(RrConn::Load { .. }), Conn::Tcp(sock)) => load.push((s.id, sock)),
                (Some(RrConn::Load { .. }), Conn::Udp(_)) => {
                    return Err(EngineError::Protocol(format!(
                        "load stream {} is not a TCP connection",
                        s.id
                    )))
                }
                (None, _) => {
                    return Err(EngineError::Protocol(format!(
                        "connection {} is not part of this request/response test",
                        s.id
                    )))
                }
            }
        }
        let flows = grid
            .into_iter()
            .enumerate()
            .map(|(f, conns)| {
                conns
                    .into_iter()
                    .enumerate()
                    .map(|(p, c)| {
                        c.ok_or_else(|| {
                            EngineError::Protocol(format!(
                                "flow {f} has no connection for phase {p}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RrConns { flows, load })
    }
}
