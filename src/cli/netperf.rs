//! netperf-style invocations, rewritten to linerate's own before clap sees
//! them, so both spellings reach the same validated config:
//!
//! - `linerate TCP_STREAM HOST`, `linerate TCP_MAERTS HOST`
//! - `linerate -t TCP_STREAM -H HOST -l 10` (netperf's global flags)
//! - `-H HOST` → `HOST`; `-l N` → `--time N`, `-l -N` → `--bytes N`
//!   (netperf reads a negative length as a byte count).

fn test_name(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "TCP_STREAM" => Some(&["tcp"]),
        "TCP_MAERTS" => Some(&["tcp", "--reverse"]),
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
    let mut i = 0;
    while i < rest.len() {
        match (rest[i].as_str(), rest.get(i + 1)) {
            ("-H", Some(host)) => {
                out.push(host.clone());
                i += 2;
            }
            ("-l", Some(v)) => {
                match v.strip_prefix('-') {
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
    out
}
