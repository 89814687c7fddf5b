//! The words for what an accelerated engine used on one end (registered
//! buffers, multishot receive, SQPOLL, zero-copy sends), shared by the
//! stream report (`human.rs`) and the request/response table
//! (`rr_table.rs`).

use linerate_proto::measure::EngineUse;

/// What an accelerated engine used on one end, from its own counts.
pub(crate) fn engine_use_words(u: &EngineUse) -> String {
    let mut used = Vec::new();
    if u.registered_buffers {
        used.push("registered buffers".to_string());
    }
    if u.multishot_recv {
        used.push("multishot receive into a provided buffer ring".into());
    }
    if u.sqpoll {
        used.push("SQPOLL".into());
    }
    match &u.zerocopy {
        Some(z) if z.sends == 0 && z.under_threshold > 0 => used.push(format!(
            "no zero-copy sends: all {} too small for zero copy, copied instead",
            z.under_threshold
        )),
        Some(z) if z.sends > 0 => {
            used.push(format!(
                "zero-copy sends: {} sent, {} completed, {} of them copied by the kernel{}",
                z.sends,
                z.completed,
                z.copied,
                if z.completed > 0 && z.copied == z.completed {
                    " (every one: loopback or a device without scatter-gather copies)"
                } else {
                    ""
                }
            ));
            if z.under_threshold > 0 {
                used.push(format!(
                    "{} sends too small for zero copy copied instead",
                    z.under_threshold
                ));
            }
        }
        _ => {}
    }
    if let Some(c) = &u.sendfile {
        used.push(format!("sendfile: {} calls, {} bytes", c.calls, c.bytes));
    }
    if let Some(c) = &u.splice_recv {
        used.push(format!(
            "splice receive: {} calls, {} bytes",
            c.calls, c.bytes
        ));
    }
    let mut s = format!(
        "engine {}: {}",
        u.engine,
        if used.is_empty() {
            "plain requests".to_string()
        } else {
            used.join("; ")
        }
    );
    for n in &u.notes {
        s.push_str(&format!("; {n}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::measure::{CallsBytes, EngineUse};

    #[test]
    fn issue_8_sendfile_and_splice_counts_are_named() {
        let u = EngineUse {
            engine: "zerocopy:sendfile".into(),
            sendfile: Some(CallsBytes {
                calls: 3,
                bytes: 3000,
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine zerocopy:sendfile: sendfile: 3 calls, 3000 bytes"
        );
        let u = EngineUse {
            engine: "zerocopy:sendfile".into(),
            splice_recv: Some(CallsBytes {
                calls: 7,
                bytes: 3000,
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine zerocopy:sendfile: splice receive: 7 calls, 3000 bytes"
        );
    }

    #[test]
    fn issue_8_sends_too_small_for_zero_copy_are_counted_apart() {
        let u = EngineUse {
            engine: "uring".into(),
            zerocopy: Some(linerate_proto::measure::ZeroCopyUse {
                sends: 2,
                completed: 2,
                copied: 2,
                under_threshold: 5,
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine uring: zero-copy sends: 2 sent, 2 completed, 2 of them copied by the kernel \
             (every one: loopback or a device without scatter-gather copies); 5 sends too small \
             for zero copy copied instead"
        );
        let u = EngineUse {
            engine: "uring".into(),
            zerocopy: Some(linerate_proto::measure::ZeroCopyUse {
                under_threshold: 7,
                ..Default::default()
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine uring: no zero-copy sends: all 7 too small for zero copy, copied instead"
        );
    }
}
