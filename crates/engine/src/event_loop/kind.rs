//! The kind of waiting a loop thread does (readiness or completions),
//! chosen by its engine; named in thread labels and reports.

use crate::engines::EngineKind;

/// How a loop waits for its flows: readiness (epoll) or completions
/// (io_uring), by the engine it runs ([`engine_for`](super::engine_for)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopKind {
    Epoll,
    IoUring,
}

impl LoopKind {
    pub fn of(engine: EngineKind) -> LoopKind {
        match engine {
            EngineKind::Uring { .. } => LoopKind::IoUring,
            _ => LoopKind::Epoll,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LoopKind::Epoll => "epoll",
            LoopKind::IoUring => "io_uring",
        }
    }
}
