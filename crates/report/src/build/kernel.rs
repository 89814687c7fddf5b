//! The kernel's view of a UDP test's loss: its drop counters beside the
//! counted loss, and whether the path ever cut GSO runs into packets.

use linerate_proto::measure::{KernelUdp, SideResults};

use crate::model::{KernelView, UdpSummary};

/// The kernel's counters beside a flow's counted loss, and what they say.
pub(super) fn kernel_view(
    u: &UdpSummary,
    sender: Option<&KernelUdp>,
    receiver: Option<&KernelUdp>,
    bidir: bool,
    gro: bool,
    gso: bool,
) -> KernelView {
    let snd_snmp = sender.and_then(|k| k.snmp);
    let rcv_snmp = receiver.and_then(|k| k.snmp);
    let v = KernelView {
        counted_lost: u.lost,
        socket_drops: u.socket_drops,
        // A send the kernel refused (ENOBUFS) counts in SndbufErrors too,
        // but the sender offered the same datagram again: not a drop.
        sender_sndbuf_errors: snd_snmp.map(|s| s.sndbuf_errors.saturating_sub(u.send_errors)),
        receiver_rcvbuf_errors: rcv_snmp.map(|s| s.rcvbuf_errors),
        receiver_in_errors: rcv_snmp.map(|s| s.in_errors),
        sender_tx_dropped: sender
            .and_then(|k| k.interface.as_ref())
            .map(|i| i.tx_dropped),
        receiver_rx_dropped: receiver
            .and_then(|k| k.interface.as_ref())
            .map(|i| i.rx_dropped),
        explanation: String::new(),
    };
    let parts = [
        (v.socket_drops, "at the receiving sockets (SO_RXQ_OVFL)"),
        (
            v.sender_sndbuf_errors,
            "on the sending host's queues (Udp SndbufErrors: socket buffer or qdisc full)",
        ),
        (v.sender_tx_dropped, "by the sending interface (tx_dropped)"),
        (
            v.receiver_rx_dropped,
            "by the receiving interface (rx_dropped)",
        ),
    ];
    let explained: u64 = parts.iter().filter_map(|(n, _)| *n).sum();
    let listed: Vec<String> = parts
        .iter()
        .filter_map(|(n, what)| n.filter(|&n| n > 0).map(|n| format!("{n} {what}")))
        .collect();
    let unmeasured: Vec<&str> = parts
        .iter()
        .filter(|(n, _)| n.is_none())
        .map(|(_, what)| *what)
        .collect();
    let mut e = match (u.lost, explained) {
        (0, 0) => "no datagram lost; the kernel counted no drops".to_string(),
        (l, x) if l == x => format!(
            "all {l} lost datagrams are accounted for by the kernel: {}",
            listed.join(", ")
        ),
        (l, 0) => format!(
            "{l} datagrams lost and the kernel counted no drops on either host: they were lost on the path (a switch, a NIC, the far interface) or where these counters cannot see"
        ),
        // A dropped GRO super-buffer, or a GSO run a queue dropped whole,
        // is one drop however many datagrams it held, so the counters
        // cannot add up to the loss.
        (l, x) if l > x && (gro || gso) && x > 0 => format!(
            "{l} datagrams lost; the kernel counted {x} drops ({}), but {}, so its counters fall short of the loss",
            listed.join(", "),
            match (gso, gro) {
                (true, true) => "the sender used GSO and the receiver GRO: the kernel counts a GSO run (up to 128 datagrams) that a queue dropped whole, or a dropped GRO super-buffer (up to 64, 128 on loopback), as one drop",
                (true, false) => "the sender used GSO: the kernel counts a GSO run (up to 128 datagrams) that a queue dropped whole as one drop",
                _ => "the receiver used GRO: the kernel counts a dropped GRO super-buffer (up to 64 datagrams, 128 on loopback) as one drop",
            }
        ),
        (l, x) if l > x => format!(
            "{l} datagrams lost; the kernel accounts for {x} ({}); the other {} were lost on the path or where these counters cannot see",
            listed.join(", "),
            l - x
        ),
        (l, x) => format!(
            "{l} datagrams lost but the kernel counted {x} drops ({}): its counters cover every socket in the namespace and every packet on the interface, not only this test's",
            listed.join(", ")
        ),
    };
    if bidir && explained > 0 {
        e.push_str("; the hosts' counters are shared by both directions");
    }
    if u.send_errors > 0 && v.sender_sndbuf_errors.is_some() {
        e.push_str(&format!(
            "; the sender's {} refused sends (ENOBUFS), which Udp SndbufErrors counts too, were offered again, not lost",
            u.send_errors
        ));
    }
    if !unmeasured.is_empty() {
        e.push_str(&format!("; not measured: drops {}", unmeasured.join(", ")));
    }
    KernelView {
        explanation: e,
        ..v
    }
}

/// The path of a UDP test whose both ends' data interfaces are loopback or
/// veth (issue 28): such a path delivers datagrams without ever cutting a
/// GSO run into packets, so its datagram rates are not NIC packet rates.
/// Only fixed words come back (the peer's driver name is compared, not
/// printed).
pub(super) fn non_segmenting_path(
    client: &SideResults,
    server: &SideResults,
) -> Option<&'static str> {
    let kind = |r: &SideResults| {
        let i = r.kernel_udp.as_ref()?.interface.as_ref()?;
        match (i.name.as_str(), i.driver.as_deref()) {
            ("lo", _) => Some("loopback"),
            (_, Some("veth")) => Some("veth"),
            _ => None,
        }
    };
    match (kind(client)?, kind(server)?) {
        (a, b) if a == b => Some(if a == "veth" { "a veth pair" } else { a }),
        _ => Some("loopback and veth"),
    }
}
