//! netperf-style invocations, rewritten to linerate's own before clap sees
//! them, so both spellings reach the same validated config:
//!
//! - `linerate TCP_STREAM HOST`, `linerate TCP_MAERTS HOST`, `linerate UDP_STREAM HOST`
//! - `linerate TCP_RR HOST`, `linerate UDP_RR HOST`, `linerate TCP_CRR HOST`
//! - `linerate -t TCP_STREAM -H HOST -l 10` (netperf's global flags)
//! - `-H HOST` → `HOST`; `-l N` → `--time N`, `-l -N` → `--bytes N`
//!   (netperf reads a negative length as a byte count, or for the
//!   request/response tests as a transaction count: `--count N`).
//! - Request/response tests take netperf's test-specific `-- -r REQ,RESP`
//!   (`--size REQ --response-size RESP`) and, like netperf, default to one
//!   1-byte size (linerate's own `rr` runs eight sizes by default).

fn test_name(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "TCP_STREAM" => Some(&["tcp"]),
        "TCP_MAERTS" => Some(&["tcp", "--reverse"]),
        "TCP_RR" => Some(&["rr", "--proto", "tcp"]),
        "UDP_RR" => Some(&["rr", "--proto", "udp"]),
        "TCP_CRR" => Some(&["crr"]),
        "UDP_STREAM" => Some(&["udp"]),
        _ => None,
    }
}

/// Rewrites `argv` if it uses netperf names; otherwise returns it unchanged.
pub fn rewrite(argv: Vec<String>) -> Vec<String> {
    let Some((prog, rest)) = argv.split_first() else {
        return argv;
    };
    // Find the test: first argument, or the value of `-t`.
    let (test, mut rest) = if let Some(t) = rest.first().and_then(|f| test_name(f)) {
        (t, rest[1..].to_vec())
    } else if let (Some("-t"), Some(t)) = (
        rest.first().map(String::as_str),
        rest.get(1).and_then(|n| test_name(n)),
    ) {
        (t, rest[2..].to_vec())
    } else {
        return argv;
    };
    let mut out: Vec<String> = std::iter::once(prog.clone())
        .chain(test.iter().map(|s| s.to_string()))
        .collect();
    let rr = matches!(test[0], "rr" | "crr");
    let mut sized = false;
    let mut test_specific = false;
    let mut i = 0;
    while i < rest.len() {
        match (rest[i].as_str(), rest.get(i + 1)) {
            ("--", _) if rr => {
                test_specific = true;
                i += 1;
            }
            ("-r", Some(v)) if rr && test_specific => {
                let (req, resp) = v.split_once(',').unwrap_or((v, v));
                out.extend(["--size".into(), req.to_string()]);
                out.extend(["--response-size".into(), resp.to_string()]);
                sized = true;
                i += 2;
            }
            ("-s" | "--size" | "--sizes", _) if rr => {
                sized = true;
                out.push(std::mem::take(&mut rest[i]));
                i += 1;
            }
            ("-H", Some(host)) => {
                out.push(host.clone());
                i += 2;
            }
            ("-l", Some(v)) => {
                match v.strip_prefix('-') {
                    Some(n) if rr => out.extend(["--count".into(), n.to_string()]),
                    Some(bytes) => out.extend(["--bytes".into(), bytes.to_string()]),
                    None => out.extend(["--time".into(), v.clone()]),
                }
                i += 2;
            }
            _ => {
                out.push(std::mem::take(&mut rest[i]));
                i += 1;
            }
        }
    }
    if rr && !sized {
        out.extend(["--size".into(), "1".into()]);
    }
    out
}
