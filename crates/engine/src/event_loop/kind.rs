//! The kind of waiting a loop thread does (readiness or completions),
//! chosen by its engine; named in thread labels and recorded in each
//! side's results ([`linerate_proto::measure::SideResults::event_loop`]).

use crate::engines::EngineKind;
pub use linerate_proto::measure::LoopKind;

/// How a loop running `engine` waits for its flows: completions
/// (io_uring) for `uring`, readiness (epoll) for every other engine
/// ([`engine_for`](super::engine_for)).
pub fn loop_kind(engine: EngineKind) -> LoopKind {
    match engine {
        EngineKind::Uring { .. } => LoopKind::IoUring,
        _ => LoopKind::Epoll,
    }
}
