//! What the engines' I/O objects used (registered buffers, zero-copy,
//! sendfile, notes): recorded per thread as each object is dropped, merged,
//! and taken by the runner after the loop returns.

use linerate_proto::measure::{CallsBytes, EngineUse, ZeroCopyUse};

thread_local! {
    /// What the engine's I/O objects on this thread used, merged: each
    /// stream (and rr flow) runs on its own thread, so the runner collects
    /// it after the loop returns without every loop passing it back.
    static USED: std::cell::RefCell<Option<EngineUse>> = const { std::cell::RefCell::new(None) };
}

/// Records what an engine's I/O object used (called as it is dropped).
pub(crate) fn record_use(u: EngineUse) {
    USED.with(|cell| merge_use(&mut cell.borrow_mut(), u));
}

/// Merges `u` into `into`: a feature used by either, zero-copy counts
/// added, notes once each.
pub(crate) fn merge_use(into: &mut Option<EngineUse>, u: EngineUse) {
    *into = Some(match into.take() {
        None => u,
        Some(mut a) => {
            a.registered_buffers |= u.registered_buffers;
            a.sqpoll |= u.sqpoll;
            a.multishot_recv |= u.multishot_recv;
            a.zerocopy = match (a.zerocopy, u.zerocopy) {
                (Some(x), Some(y)) => Some(ZeroCopyUse {
                    sends: x.sends + y.sends,
                    completed: x.completed + y.completed,
                    copied: x.copied + y.copied,
                    under_threshold: x.under_threshold + y.under_threshold,
                }),
                (x, y) => x.or(y),
            };
            a.sendfile = add_calls(a.sendfile, u.sendfile);
            a.splice_recv = add_calls(a.splice_recv, u.splice_recv);
            a.xdp = match (a.xdp, u.xdp) {
                (Some(mut x), Some(y)) => {
                    x.merge(&y);
                    Some(x)
                }
                (x, y) => x.or(y),
            };
            for n in u.notes {
                if !a.notes.contains(&n) {
                    a.notes.push(n);
                }
            }
            a
        }
    });
}

/// Two counts of the same calls, summed (absent where neither was used).
fn add_calls(a: Option<CallsBytes>, b: Option<CallsBytes>) -> Option<CallsBytes> {
    match (a, b) {
        (Some(x), Some(y)) => Some(CallsBytes {
            calls: x.calls + y.calls,
            bytes: x.bytes + y.bytes,
        }),
        (x, y) => x.or(y),
    }
}

/// Takes what the engines on this thread recorded since the last take.
pub fn take_use() -> Option<EngineUse> {
    USED.with(|cell| cell.borrow_mut().take())
}
