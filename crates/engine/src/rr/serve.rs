//! The server's phase loop, shared by every transport: a request in
//! through the transport's [`Serve`], the flow's
//! [`linerate_proto::rr_flow::RrServer`] core's response out, until the
//! client ends the phase. A leaf under the transports (`tcp`, `udp`),
//! which implement it, and the server side (`server`), which runs it.

use std::time::Instant;

use linerate_proto::rr_flow::RrServer;

use crate::clock::mono_ns;
use crate::EngineError;

use super::params::{Buffers, PhaseCtx, PhaseOut, SpinStats};

/// How a server flow receives requests and answers them on one transport
/// during a phase.
pub(super) trait Serve {
    /// The next request, `len` bytes (in `buf`, which holds at least `len`,
    /// or in the transport's own buffer); `Ok(None)` when the client ended
    /// the phase.
    fn next_request<'b>(
        &'b mut self,
        buf: &'b mut [u8],
        len: usize,
    ) -> Result<Option<&'b [u8]>, EngineError>;
    fn respond(&mut self, resp: &[u8]) -> Result<(), EngineError>;
    /// True when requests cannot be lost on the way (TCP): their sequence
    /// numbers must then count up from 0. Otherwise they are echoed.
    fn reliable(&self) -> bool;
    /// Busy poll: what the connection's spinning came to.
    fn spin(&self) -> Option<SpinStats>;
}

/// How a server phase ended.
pub(super) struct Served {
    pub(super) transactions: u64,
    pub(super) elapsed_ns: u64,
    pub(super) out: PhaseOut,
}

/// The one server phase loop: a request in, the flow's
/// [`RrServer`] core's response out, until the client ends the phase. `setup` is the transport's preparation, which
/// hands back its [`Serve`] and what the kernel said to busy polling.
pub(super) fn serve_phase<S: Serve>(
    cx: &PhaseCtx<'_>,
    bufs: &mut Buffers,
    setup: impl FnOnce() -> Result<(S, Option<String>), EngineError>,
) -> Served {
    let (req_len, resp_len) = (cx.phase.request as usize, cx.phase.response as usize);
    let resp = &mut bufs.resp[..resp_len];
    let timed = cx.p.plan.per_message();
    let mut n = 0u64;
    let mut first: Option<Instant> = None;
    let mut out = PhaseOut::failed(EngineError::Aborted);
    out.result = (|| {
        let (mut s, said) = setup()?;
        out.busy_poll = said;
        let mut core = RrServer::new(cx.flow, req_len, s.reliable());
        let r = (|| {
            while let Some(req) = s.next_request(&mut bufs.req, req_len)? {
                let t_rx = timed.then(mono_ns);
                first.get_or_insert_with(Instant::now);
                core.on_request(req, t_rx, mono_ns, resp)?;
                s.respond(resp)?;
                n += 1;
                cx.watch.tick(cx.flow);
            }
            Ok(())
        })();
        out.spin = s.spin();
        r
    })();
    Served {
        transactions: n,
        elapsed_ns: first.map_or(0, |f| f.elapsed().as_nanos() as u64),
        out,
    }
}
