//! The msg test's rules: messages go client to server over TCP, and the
//! plan is held within the server's limits.

use crate::limits::{Budget, ServerLimits, SpecError};
use crate::spec::{Direction, Protocol, TestSpec, MAX_MSG_MESSAGES, MAX_MSG_SIZE, MAX_MSG_TRIALS};

/// Messages go over TCP.
pub(super) fn params(
    spec: &mut TestSpec,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    super::stream::tcp_only(spec, limits, notes, "messages go over TCP")
}

/// Kind `msg`: the plan within the server's limits; messages go client to
/// server on TCP, one connection per concurrent transfer.
pub(super) fn negotiate(spec: &TestSpec, limits: &ServerLimits) -> Result<(), SpecError> {
    let err = |reason: String| {
        Err(SpecError {
            field: "msg",
            reason,
        })
    };
    let Some(m) = &spec.msg else {
        return err("a msg test without its parameters".into());
    };
    if spec.protocol != Protocol::Tcp || spec.direction != Direction::Forward {
        return err("messages go from client to server over TCP".into());
    }
    if m.sizes.is_empty() || m.sizes.len() != m.messages.len() || m.sizes.len() > 64 {
        return err("1 to 64 sizes, each with its message count".into());
    }
    if let Some(s) = m.sizes.iter().find(|&&s| s == 0 || s > MAX_MSG_SIZE) {
        return err(format!(
            "a {s}-byte message: sizes must be 1 to {MAX_MSG_SIZE} bytes"
        ));
    }
    if m.trials == 0 || m.trials > MAX_MSG_TRIALS {
        return err(format!(
            "{} trials: 1 to {MAX_MSG_TRIALS} allowed",
            m.trials
        ));
    }
    if let Some(n) = m.messages.iter().find(|&&n| n == 0 || n > MAX_MSG_MESSAGES) {
        return err(format!(
            "{n} messages per trial: 1 to {MAX_MSG_MESSAGES} allowed"
        ));
    }
    // Each receiving connection holds one message.
    let largest = u64::from(m.sizes.iter().copied().max().unwrap_or(0));
    let memory = largest * u64::from(spec.streams.max(1));
    if memory > limits.max_test_memory {
        return err(format!(
            "{} connections × {largest}-byte messages need {memory} bytes of receive buffers; \
             this server allows {} per test (--max-test-memory)",
            spec.streams, limits.max_test_memory
        ));
    }
    Ok(())
}

/// Messages go as fast as they are acknowledged: unpaced, over every
/// connection at once (their receive buffers are checked in [`negotiate`]).
pub(super) const BUDGET: Budget = Budget {
    stream_rate: |_| Some(None),
    clamp: None,
    io_len: |spec| spec.len,
    connections: |spec| spec.connection_count() as u64,
};
