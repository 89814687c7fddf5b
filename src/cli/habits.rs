//! iperf3 habits caught before clap sees the command line: `linerate -c
//! HOST` and `linerate -s` get told the linerate way instead of clap's
//! "unexpected argument".

/// A hint for an iperf3-style command line, or `None`.
pub fn iperf3_hint(argv: &[String]) -> Option<String> {
    let first = argv.get(1)?.as_str();
    let host = argv.get(2).filter(|h| !h.starts_with('-'));
    match first {
        "-c" | "--client" => {
            let host = host.map_or("HOST", String::as_str);
            Some(format!(
                "linerate has no -c (that is iperf3's spelling): run `linerate tcp {host}` \
                 (or `linerate udp {host}`, `linerate rr {host}`) against a `linerate server`. \
                 A `linerate server` also serves real iperf3 clients, so `iperf3 -c {host}` \
                 works against it too; against a real iperf3 server add `--iperf3`, or keep \
                 iperf3's flags and output with `linerate iperf3 -c {host} …`.\n"
            ))
        }
        "-s" | "--server" => Some(
            "linerate has no -s (that is iperf3's spelling): run `linerate server` \
             (port 5201, like iperf3); it serves linerate clients and real iperf3 clients \
             on that one port.\n"
                .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn issue_13_iperf3_client_and_server_flags_get_a_hint() {
        let h = iperf3_hint(&argv(&["linerate", "-c", "10.0.0.1", "-t", "5"])).expect("hint");
        assert!(h.contains("linerate tcp 10.0.0.1"), "{h}");
        let h = iperf3_hint(&argv(&["linerate", "-s"])).expect("hint");
        assert!(h.contains("linerate server"), "{h}");
        assert!(iperf3_hint(&argv(&["linerate", "tcp", "-c"])).is_none());
        assert!(iperf3_hint(&argv(&["linerate"])).is_none());
    }
}
