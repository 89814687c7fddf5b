//! The words for what an accelerated engine used on one end (registered
//! buffers, multishot receive, SQPOLL, zero-copy sends, the AF_XDP
//! socket), shared by the stream report (`human.rs`) and the
//! request/response table (`rr_table.rs`).

use linerate_proto::measure::{EngineUse, XdpUse};

/// The AF_XDP socket an `xdp` end ran on: where, how, what its rings and
/// the kernel counted, and which counts are the flow's own and which the
/// socket's (shared by the interface's flows).
fn xdp_words(x: &XdpUse) -> String {
    let mut s = format!(
        "AF_XDP on {} queue {}{}: {} XDP, {} mode{}; UMEM {} KiB in {}-byte frames; \
         rings: fill {}, completion {}, RX {}, TX {}",
        x.iface,
        x.queue,
        queues_words(x),
        x.mode,
        x.copy,
        if x.need_wakeup { ", need-wakeup" } else { "" },
        x.umem_bytes >> 10,
        x.frame_size,
        x.fill_ring,
        x.completion_ring,
        x.rx_ring,
        x.tx_ring
    );
    match x.wait.as_deref() {
        Some("spin") => s.push_str("; waits spin on the rings"),
        Some("poll") => s.push_str("; waits sleep in poll(2)"),
        _ => {}
    }
    if x.flows > 1 {
        let why = match x.iface_queues {
            0 => String::new(),
            1 => format!(" ({} has 1 queue)", x.iface),
            n => format!(" ({} has {n} queues)", x.iface),
        };
        s.push_str(&format!(
            "; socket shared by {} flows{why}: its socket counts and XDP_STATISTICS cover \
             them all",
            x.flows
        ));
    }
    if x.socket_drops_claimed {
        // One stream of a shared socket takes its drops, so a sum over the
        // streams counts them once; the others' are their own only.
        s.push_str("; this stream's socket drops include the AF_XDP socket's");
    }
    s.push_str(&format!(
        "; own counts: TX ring full {}, no free frame {}, via the kernel socket {}, \
         datagrams of no flow {}; socket counts: fill ring starved {}, unparsed frames {}, \
         bad UDP checksums {}, UDP checksums left unfinished by the sender's offload {}, \
         ring wakeups {}",
        x.tx_ring_full,
        x.tx_no_frame,
        x.via_kernel,
        x.rx_foreign,
        x.fill_starved,
        x.rx_unparsed,
        x.rx_bad_checksum,
        x.rx_unfinished_checksum,
        x.wakeups
    ));
    match &x.stats {
        Some(t) => s.push_str(&format!(
            "; XDP_STATISTICS: rx_dropped {}, rx_invalid_descs {}, tx_invalid_descs {}, \
             rx_ring_full {}, fill_ring_empty {}, tx_ring_empty {}",
            t.rx_dropped,
            t.rx_invalid_descs,
            t.tx_invalid_descs,
            t.rx_ring_full,
            t.fill_ring_empty,
            t.tx_ring_empty
        )),
        None => s.push_str("; XDP_STATISTICS: not given by the kernel"),
    }
    s
}

/// Every queue this process had a socket on, where there were several
/// or the interface has more than one: " (queues 0, 1 of 2)".
fn queues_words(x: &XdpUse) -> String {
    let before_queues_were_read = x.queues.is_empty() && x.iface_queues == 0;
    if before_queues_were_read || (x.queues.len() <= 1 && x.iface_queues <= 1 && x.flows <= 1) {
        return String::new();
    }
    let list: Vec<String> = x.queues.iter().map(u32::to_string).collect();
    let of = match x.iface_queues {
        0 => String::new(),
        n => format!(" of {n}"),
    };
    match list.len() {
        0 => format!(" (the interface has {})", x.iface_queues),
        1 => format!(" (queue {}{of} in use)", list[0]),
        _ => format!(" (queues {}{of} in use)", list.join(", ")),
    }
}

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
    if let Some(x) = &u.xdp {
        used.push(xdp_words(x));
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
    fn issue_25_an_xdp_end_names_its_socket_and_whose_counts_are_whose() {
        let x = XdpUse {
            iface: "vb".into(),
            queue: 0,
            mode: "native".into(),
            copy: "copy".into(),
            need_wakeup: true,
            umem_bytes: 8 << 20,
            frame_size: 4096,
            fill_ring: 2048,
            completion_ring: 2048,
            rx_ring: 2048,
            tx_ring: 2048,
            flows: 2,
            tx_ring_full: 3,
            ..XdpUse::default()
        };
        let u = EngineUse {
            engine: "xdp".into(),
            xdp: Some(x.clone()),
            ..EngineUse::default()
        };
        let w = engine_use_words(&u);
        assert!(
            w.starts_with(
                "engine xdp: AF_XDP on vb queue 0: native XDP, copy mode, need-wakeup; \
                 UMEM 8192 KiB in 4096-byte frames; rings: fill 2048, completion 2048, \
                 RX 2048, TX 2048; socket shared by 2 flows"
            ),
            "{w}"
        );
        assert!(w.contains("own counts: TX ring full 3,"), "{w}");
        assert!(w.contains("XDP_STATISTICS: not given by the kernel"), "{w}");
        assert!(!w.contains("plain requests"), "{w}");
        // A flow alone on its socket says nothing of sharing.
        let alone = EngineUse {
            xdp: Some(XdpUse { flows: 1, ..x }),
            ..u
        };
        assert!(!engine_use_words(&alone).contains("shared"));
    }

    /// `-P 2` over a two-queue interface: each stream's line lists every
    /// queue in use; where the streams outnumber the queues, the sharing
    /// says why.
    #[test]
    fn issue_25_an_xdp_end_lists_every_queue_and_why_a_socket_is_shared() {
        let x = XdpUse {
            iface: "vb".into(),
            queue: 1,
            queues: vec![0, 1],
            iface_queues: 2,
            flows: 1,
            ..XdpUse::default()
        };
        let u = EngineUse {
            engine: "xdp".into(),
            xdp: Some(x.clone()),
            ..EngineUse::default()
        };
        let w = engine_use_words(&u);
        assert!(
            w.starts_with("engine xdp: AF_XDP on vb queue 1 (queues 0, 1 of 2 in use): "),
            "{w}"
        );
        assert!(!w.contains("shared"), "{w}");
        let shared = EngineUse {
            xdp: Some(XdpUse {
                queue: 0,
                queues: vec![0],
                iface_queues: 1,
                flows: 2,
                ..x
            }),
            ..u
        };
        let w = engine_use_words(&shared);
        assert!(
            w.contains("AF_XDP on vb queue 0 (queue 0 of 1 in use): ")
                && w.contains("socket shared by 2 flows (vb has 1 queue)"),
            "{w}"
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
