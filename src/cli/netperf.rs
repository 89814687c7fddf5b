//! netperf-style invocations, rewritten to linerate's own before clap sees
//! them, so both spellings reach the same validated config. netperf's names
//! are how many users type their tests, so its common options work as
//! netperf users expect (issue 13):
//!
//! - Test names, in any case: `TCP_STREAM`, `TCP_MAERTS`, `UDP_STREAM`,
//!   `TCP_RR`, `UDP_RR`, `TCP_CRR`, first or as `-t NAME` anywhere
//!   (`linerate -H h -t tcp_rr` is netperf's own order).
//! - Global options: `-H HOST`, `-p PORT`, `-l N` (`--time N`; a negative
//!   `-l` is a byte count, or a transaction count for the request/response
//!   tests), `-D [SECS]` (interim results: `--interval`), `-c`/`-C` (local /
//!   remote CPU: linerate always measures both, so they are accepted as
//!   is).
//! - Test-specific options after `--`: `-m SIZE` (send size: `--len`),
//!   `-s SIZE`/`-S SIZE` (local/remote socket buffer: `--window`, which
//!   linerate sets on both ends, so two different sizes are refused),
//!   `-D` (TCP_NODELAY: `--no-delay`), `-r REQ,RESP` (request/response
//!   sizes; netperf's default for those tests is one 1-byte size).
//! - `UDP_STREAM` sends unpaced, as netperf does, unless a rate is given.
//!
//! netperf options linerate cannot honour (`-I`, `-T`, `-f`, `-M`, …) are
//! refused by name rather than ignored. Where netperf and linerate use one
//! letter for different things outside these (`-P`, `-i`), linerate's
//! meaning stands.

/// The linerate command a netperf test name stands for.
fn test_name(name: &str) -> Option<&'static [&'static str]> {
    Some(match name.to_ascii_uppercase().as_str() {
        "TCP_STREAM" => &["tcp"],
        "TCP_MAERTS" => &["tcp", "--reverse"],
        "TCP_RR" => &["rr", "--proto", "tcp"],
        "UDP_RR" => &["rr", "--proto", "udp"],
        "TCP_CRR" => &["crr"],
        "UDP_STREAM" => &["udp"],
        _ => return None,
    })
}

/// Why a netperf option cannot be taken, for the ones people reach for.
fn unsupported(flag: &str) -> Option<&'static str> {
    Some(match flag {
        "-I" => "netperf's confidence intervals (-I) are not supported; run the test several times",
        "-M" => "a separate receive size (-M) is not supported: linerate's receivers read up to --len at a time",
        "-T" => "netperf's -T (CPU binding) is spelled --cpus LIST in linerate",
        "-f" => "netperf's -f (output units) is not supported: linerate prints SI units with the unit named",
        _ => return None,
    })
}

/// Rewrites `argv` if it uses netperf names; otherwise returns it
/// unchanged. An error names a netperf option that cannot be honoured.
pub fn rewrite(argv: Vec<String>) -> Result<Vec<String>, String> {
    let Some((prog, rest)) = argv.split_first() else {
        return Ok(argv);
    };
    // Find the test: the first argument, or the value of `-t` anywhere.
    let (test, rest): (_, Vec<String>) = if let Some(t) = rest.first().and_then(|f| test_name(f)) {
        (t, rest[1..].to_vec())
    } else if let Some(i) = rest
        .iter()
        .position(|a| a == "-t")
        .filter(|&i| rest.get(i + 1).and_then(|n| test_name(n)).is_some())
    {
        let t = test_name(&rest[i + 1]).unwrap_or(&["tcp"]);
        let mut r = rest.to_vec();
        r.drain(i..i + 2);
        (t, r)
    } else {
        return Ok(argv);
    };
    let mut w = Rewrite {
        out: std::iter::once(prog.clone())
            .chain(test.iter().map(|s| s.to_string()))
            .collect(),
        rr: matches!(test[0], "rr" | "crr"),
        udp: test[0] == "udp",
        sized: false,
        paced: false,
        window: None,
    };
    let mut test_specific = false;
    let mut i = 0;
    while i < rest.len() {
        let arg = rest[i].as_str();
        let val = rest.get(i + 1);
        i += if test_specific {
            w.test_specific(arg, val)?
        } else if arg == "--" {
            test_specific = true;
            1
        } else {
            w.global(arg, val)?
        };
    }
    if w.rr && !w.sized {
        w.out.extend(["--size".into(), "1".into()]);
    }
    if w.udp && !w.paced {
        // netperf's UDP_STREAM sends as fast as it can.
        w.out.extend(["--rate".into(), "0".into()]);
    }
    Ok(w.out)
}

/// The linerate command line being built, and what the netperf one has
/// said so far that changes what is added at the end.
struct Rewrite {
    out: Vec<String>,
    rr: bool,
    udp: bool,
    /// An rr message size was given (else netperf's 1 byte is added).
    sized: bool,
    /// A UDP rate was given (else netperf's unpaced send is added).
    paced: bool,
    /// The one socket buffer size taken from -s/-S.
    window: Option<String>,
}

impl Rewrite {
    /// One test-specific option (after `--`); returns how many arguments
    /// it took.
    fn test_specific(&mut self, arg: &str, val: Option<&String>) -> Result<usize, String> {
        match arg {
            "-r" if self.rr => {
                let v = val.ok_or("netperf -r needs REQ,RESP")?;
                let (req, resp) = v.split_once(',').unwrap_or((v, v));
                self.out.extend(["--size".into(), req.to_string()]);
                self.out.extend(["--response-size".into(), resp.to_string()]);
                self.sized = true;
                Ok(2)
            }
            "-m" => {
                let v = val.ok_or("netperf -m needs a send size")?;
                let flag = if self.rr { "--size" } else { "--len" };
                self.sized |= self.rr;
                self.out.extend([flag.into(), v.clone()]);
                Ok(2)
            }
            "-s" | "-S" => {
                let v = val.ok_or_else(|| format!("netperf {arg} needs a socket buffer size"))?;
                // netperf accepts "SIZE" or "SEND,RECV"; linerate has one size.
                let (a, b) = v.split_once(',').unwrap_or((v, v));
                self.window(a)?;
                self.window(b)?;
                Ok(2)
            }
            "-D" => {
                self.out.push("--no-delay".into());
                Ok(1)
            }
            f => Err(unsupported(f).map(String::from).unwrap_or_else(|| {
                format!(
                    "netperf test-specific option {f} is not supported (linerate takes -m, -s, -S, -D{})",
                    if self.rr { ", -r" } else { "" }
                )
            })),
        }
    }

    /// One global option (before `--`); returns how many arguments it took.
    fn global(&mut self, arg: &str, val: Option<&String>) -> Result<usize, String> {
        // A value that is not itself a flag.
        let flag_val = val.filter(|v| !v.starts_with('-') || v.parse::<f64>().is_ok());
        let out = &mut self.out;
        match arg {
            "-s" | "--size" | "--sizes" if self.rr => {
                self.sized = true;
                out.push(arg.to_string());
                Ok(1)
            }
            "-b" | "--rate" | "--pps" if self.udp => {
                self.paced = true;
                out.push(arg.to_string());
                Ok(1)
            }
            "-H" => {
                out.push(val.ok_or("netperf -H needs a host")?.clone());
                Ok(2)
            }
            "-p" => {
                let port = val.ok_or("netperf -p needs a port")?;
                out.extend(["--port".into(), port.clone()]);
                Ok(2)
            }
            "-l" => {
                let v = val.ok_or("netperf -l needs a length")?;
                match v.strip_prefix('-') {
                    Some(n) if self.rr => out.extend(["--count".into(), n.to_string()]),
                    Some(bytes) => out.extend(["--bytes".into(), bytes.to_string()]),
                    None => out.extend(["--time".into(), v.clone()]),
                }
                Ok(2)
            }
            // Demo mode: interim results every SECS (netperf's default 1).
            "-D" => match flag_val {
                Some(secs) => {
                    out.extend(["--interval".into(), secs.clone()]);
                    Ok(2)
                }
                None => {
                    out.extend(["--interval".into(), "1".into()]);
                    Ok(1)
                }
            },
            // Local and remote CPU figures: linerate always measures both.
            "-c" | "-C" => Ok(1),
            f => match unsupported(f) {
                Some(why) => Err(why.into()),
                None => {
                    out.push(arg.to_string());
                    Ok(1)
                }
            },
        }
    }

    /// -s/-S: linerate sets one socket buffer size (--window) on both ends.
    fn window(&mut self, v: &str) -> Result<(), String> {
        match &self.window {
            Some(w) if w != v => Err(format!(
                "netperf -s/-S: linerate sets one socket buffer size (--window) on both ends; \
                 got {w} and {v}"
            )),
            Some(_) => Ok(()),
            None => {
                self.window = Some(v.to_string());
                self.out.extend(["--window".into(), v.to_string()]);
                Ok(())
            }
        }
    }
}
