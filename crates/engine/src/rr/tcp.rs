//! rr over TCP: a connection per (phase, flow); the client ends a phase by
//! shutting down its write side, the server answers by closing.

use std::net::Shutdown;

use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::Tally;
use linerate_proto::rr_flow::{RrClient, Transaction};

use crate::engines::{Engine, TcpEndpoint};
use crate::stream::map_err;
use crate::EngineError;

use super::exchange::{reliable_answer, run_phase, Exchange};
use super::params::{Buffers, PhaseCtx, PhaseOut, SpinStats};
use super::serve::{serve_phase, Serve, Served};
use super::stream_io::StreamIo;
use crate::wait::{prepare_tcp, Waiter};

/// A client flow's transactions on its phase connection.
struct TcpExchange<'a, E: Engine, S: TcpEndpoint> {
    io: StreamIo<'a, 'a, E, S>,
    req: &'a mut [u8],
    resp: &'a mut [u8],
    core: RrClient,
}

impl<E: Engine, S: TcpEndpoint> Exchange for TcpExchange<'_, E, S> {
    fn transact(&mut self, header: &RequestRepr) -> Result<Transaction, EngineError> {
        self.core.request(header, self.req);
        self.io.write_all(self.req)?;
        if !self.io.read_exact(self.resp)? {
            return Err(EngineError::PeerReset(
                "server closed the connection mid-phase".into(),
            ));
        }
        reliable_answer(self.core.on_response(self.resp)?)
    }

    fn end_phase(&mut self) -> Result<(), EngineError> {
        // The server answers our end of stream by closing.
        self.io
            .sock
            .shutdown(Shutdown::Write)
            .map_err(|e| map_err("shutdown", e))?;
        self.io.expect_close(self.resp)
    }
}

/// Runs one phase of a client flow on `sock`.
pub(super) fn client_phase<E: Engine, S: TcpEndpoint>(
    engine: E,
    sock: &S,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
    tally: &mut Tally,
) -> PhaseOut {
    let (wait, said) = match prepare_tcp(sock, cx.spin) {
        Ok(x) => x,
        Err(e) => return PhaseOut::failed(e),
    };
    let io = match StreamIo::new(engine, sock, Waiter::new(wait, cx.signals, true)) {
        Ok(io) => io,
        Err(e) => return PhaseOut::failed(e),
    };
    cx.watch.register(cx.flow, sock);
    let mut x = TcpExchange {
        io,
        req: &mut bufs.req[..cx.phase.request as usize],
        resp: &mut bufs.resp[..cx.phase.response as usize],
        core: RrClient::new(cx.flow, cx.phase.response as usize, None),
    };
    let result = run_phase(&mut x, cx, tally);
    // The connection closes when the flow drops it: drop the watcher's
    // copy too.
    cx.watch.release(cx.flow);
    PhaseOut {
        result,
        busy_poll: said,
        spin: x.io.waiter.stats(),
    }
}

impl<E: Engine, S: TcpEndpoint> Serve for StreamIo<'_, '_, E, S> {
    fn next_request<'b>(
        &'b mut self,
        buf: &'b mut [u8],
        len: usize,
    ) -> Result<Option<&'b [u8]>, EngineError> {
        let req = &mut buf[..len];
        Ok(self.read_exact(req)?.then_some(&*req))
    }

    fn respond(&mut self, resp: &[u8]) -> Result<(), EngineError> {
        self.write_all(resp)
    }

    fn reliable(&self) -> bool {
        true
    }

    fn spin(&self) -> Option<SpinStats> {
        self.waiter.stats()
    }
}

/// Serves one phase of a server flow on `sock` (closed by the caller).
pub(super) fn server_phase<E: Engine, S: TcpEndpoint>(
    engine: E,
    sock: &S,
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
) -> Served {
    serve_phase(cx, bufs, || {
        let (wait, said) = prepare_tcp(sock, cx.spin)?;
        let io = StreamIo::new(engine, sock, Waiter::new(wait, cx.signals, true))?;
        cx.watch.register(cx.flow, sock);
        Ok((io, said))
    })
}
