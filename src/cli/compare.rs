//! `linerate compare [HOST] tcp|udp|rr [test flags] --engines A,B,…
//! [--busy-poll both] [--preload LIB] [--repeat N] [--plot FILE.svg]
//! [--report FILE.html]`: the flags of one test, validated once per
//! variant through the same path as the test itself.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{
    args, format_of, validate, ClientConfig, Command, CompareConfig, CompareVariantConfig,
    PreloadRun, Target,
};

/// The test kinds compare runs.
const KINDS: &[&str] = &["tcp", "udp", "rr"];

/// Compare's own flags that take a value. clap leaves everything after the
/// test kind in `test`, so these are taken out of it here (they may also
/// come before the kind, where clap parses them).
const VALUE_FLAGS: &[&str] = &["--engines", "--preload", "--repeat", "--plot", "--report"];

fn set_flag(a: &mut args::CompareArgs, flag: &str, v: String) -> Result<()> {
    match flag {
        "--engines" => a.engines = v,
        "--preload" => a.preload = Some(v.into()),
        "--plot" => a.plot = Some(v.into()),
        "--report" => a.report = Some(v.into()),
        "--repeat" => {
            a.repeat = Some(
                v.parse()
                    .with_context(|| format!("--repeat: {v:?} is not a count"))?,
            )
        }
        _ => bail!("internal: {flag} is not compare's"),
    }
    Ok(())
}

/// Takes compare's own flags (`VALUE_FLAGS`, `--busy-poll both|on|off`
/// and the output flags) out of the test's flags.
fn take_own_flags(rest: &mut Vec<String>, a: &mut args::CompareArgs) -> Result<()> {
    let mut i = 0;
    while i < rest.len() {
        let value = |i: usize| rest.get(i + 1).cloned();
        let word = rest[i].clone();
        if let Some(flag) = VALUE_FLAGS.iter().find(|f| **f == word) {
            let Some(v) = value(i) else {
                bail!("{flag} needs a value (see linerate compare --help)")
            };
            set_flag(a, flag, v)?;
            rest.drain(i..i + 2);
            continue;
        }
        if let Some((flag, v)) = word
            .split_once('=')
            .filter(|(f, _)| VALUE_FLAGS.contains(f))
        {
            set_flag(a, flag, v.to_owned())?;
            rest.remove(i);
            continue;
        }
        match word.as_str() {
            "--busy-poll"
                if value(i).is_some_and(|v| ["both", "on", "off"].contains(&v.as_str())) =>
            {
                a.busy_poll = value(i);
                rest.drain(i..i + 2);
            }
            "--json" => {
                a.output.json = true;
                rest.remove(i);
            }
            "--csv" => {
                a.output.csv = true;
                rest.remove(i);
            }
            "--json-lines" => {
                a.output.json_lines = true;
                rest.remove(i);
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// `--preload LIB`: an existing file, as an absolute path.
pub(super) fn preload_lib(lib: &Path) -> Result<PathBuf> {
    if !lib.is_file() {
        bail!(
            "--preload: {} does not exist or is not a file (give the path of the LD_PRELOAD library)",
            lib.display()
        );
    }
    std::path::absolute(lib).with_context(|| format!("--preload: {}", lib.display()))
}

/// The test's flags without `-p`/`--port` (for a child that is pointed at
/// the embedded server's port).
fn without_port(flags: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let f = flags[i].as_str();
        if f == "-p" || f == "--port" {
            i += 2;
            continue;
        }
        if !(f.starts_with("--port=")
            || (f.starts_with("-p") && f.len() > 2 && !f.starts_with("--")))
        {
            out.push(flags[i].clone());
        }
        i += 1;
    }
    out
}

pub(super) fn validate_compare(mut a: args::CompareArgs) -> Result<Command> {
    let mut rest = std::mem::take(&mut a.test);
    take_own_flags(&mut rest, &mut a)?;
    // [HOST] KIND: a first word that is not a test kind is the host.
    let host = match rest.first() {
        Some(w) if !KINDS.contains(&w.as_str()) && !w.starts_with('-') => Some(rest.remove(0)),
        _ => None,
    };
    let Some(kind) = (!rest.is_empty()).then(|| rest.remove(0)) else {
        bail!(
            "compare needs a test: linerate compare [HOST] tcp|udp|rr [test flags] --engines A,B"
        );
    };
    if !KINDS.contains(&kind.as_str()) {
        bail!("compare runs tcp, udp or rr, not {kind:?}");
    }
    if rest
        .iter()
        .any(|f| f == "--engine" || f.starts_with("--engine="))
    {
        bail!("--engine: compare sets each variant's engine; list them with --engines");
    }
    let repeat = a.repeat.unwrap_or(1);
    if repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let busy = match a.busy_poll.as_deref() {
        None | Some("off") => vec![false],
        Some("on") => vec![true],
        Some("both") => vec![false, true],
        Some(v) => bail!("--busy-poll: {v:?}; compare takes both, on or off"),
    };
    // Whether the test busy-polls is its own flags' business: asked once,
    // so a test kind that gains --busy-poll is compared both ways with no
    // change here.
    if busy.contains(&true) {
        if let Err(e) = one(&host, &kind, &rest, "syscall", true) {
            let unknown = e
                .downcast_ref::<clap::Error>()
                .is_some_and(|c| c.kind() == clap::error::ErrorKind::UnknownArgument);
            if unknown {
                bail!("--busy-poll: {kind} tests do not take --busy-poll, so compare cannot run them both ways");
            }
            bail!("--busy-poll: {e:#}");
        }
    }
    let preload = a.preload.as_deref().map(preload_lib).transpose()?;
    let engines: Vec<String> = a
        .engines
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect();
    if engines.is_empty() {
        bail!("--engines: no engines given");
    }
    // The test's own flags are checked once, with the plain engine, so a
    // mistake there is a usage error rather than a row of failures.
    one(&host, &kind, &rest, "syscall", false)?;
    let mut variants = Vec::new();
    for b in &busy {
        let suffix = if *b { "+busy-poll" } else { "" };
        for e in &engines {
            variants.push(CompareVariantConfig {
                name: format!("{e}{suffix}"),
                engine: e.clone(),
                busy_poll: *b,
                config: one(&host, &kind, &rest, e, *b).map_err(|e| format!("{e:#}")),
                preload: None,
            });
        }
        if let Some(lib) = &preload {
            variants.push(preload_variant(&host, &kind, &rest, lib, *b, suffix));
        }
    }
    Ok(Command::Compare(CompareConfig {
        test: kind,
        args: rest,
        variants,
        format: format_of(&a.output),
        repeat,
        plot: a.plot,
        report: a.report,
    }))
}

/// The `--preload` variant: the syscall engine (the one that works under
/// kernel-bypass libraries), its client in a child process.
fn preload_variant(
    host: &Option<String>,
    kind: &str,
    rest: &[String],
    lib: &Path,
    busy: bool,
    suffix: &str,
) -> CompareVariantConfig {
    let config = one(host, kind, rest, "syscall", busy).map_err(|e| format!("{e:#}"));
    let embedded = matches!(&config, Ok(c) if matches!(c.target, Target::Embedded));
    let mut head = vec![kind.to_owned()];
    head.extend(host.iter().cloned());
    let mut tail = if embedded {
        without_port(rest)
    } else {
        rest.to_vec()
    };
    tail.extend(["--engine".into(), "syscall".into()]);
    if busy {
        tail.push("--busy-poll".into());
    }
    tail.push("--json".into());
    CompareVariantConfig {
        name: format!("syscall+preload{suffix}"),
        engine: "syscall".into(),
        busy_poll: busy,
        config,
        preload: Some(PreloadRun {
            lib: lib.to_owned(),
            head,
            tail,
        }),
    }
}

/// One variant's test config, through the test's own validation.
fn one(
    host: &Option<String>,
    kind: &str,
    flags: &[String],
    engine: &str,
    busy_poll: bool,
) -> Result<ClientConfig> {
    let mut argv = vec!["linerate".to_string(), kind.to_string()];
    argv.extend(host.iter().cloned());
    argv.extend(flags.iter().cloned());
    argv.extend(["--engine".into(), engine.into()]);
    if busy_poll {
        argv.push("--busy-poll".into());
    }
    let cli = <args::Cli as clap::Parser>::try_parse_from(argv)?;
    match validate(cli)? {
        Command::Tcp(c) | Command::Udp(c) => Ok(c),
        Command::Rr(r) => Ok(r.client),
        _ => bail!("internal: compare's test is not a client test"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_from;

    fn parse(args: &str) -> Result<Command, clap::Error> {
        parse_from(
            std::iter::once("linerate".to_owned())
                .chain(args.split_whitespace().map(str::to_owned)),
        )
    }

    #[test]
    fn issue_11_compare_takes_repeat_plot_and_report_from_anywhere() {
        for args in [
            "compare tcp -t 1 --engines syscall,batch --repeat 3 --plot c.svg --report c.html",
            "compare --repeat 3 --plot c.svg --report c.html tcp -t 1 --engines syscall,batch",
            "compare tcp --repeat=3 -t 1 --plot=c.svg --report=c.html --engines=syscall,batch",
        ] {
            let Ok(Command::Compare(c)) = parse(args) else {
                panic!("{args} parses")
            };
            assert_eq!(c.repeat, 3, "{args}");
            assert_eq!(c.plot.as_deref(), Some(Path::new("c.svg")), "{args}");
            assert_eq!(c.report.as_deref(), Some(Path::new("c.html")), "{args}");
            assert_eq!(c.args, ["-t", "1"], "{args}");
            assert_eq!(c.variants.len(), 2, "{args}");
        }
        assert!(parse("compare tcp --repeat 0").is_err());
        // Every kind compare runs takes --busy-poll (tcp, udp, rr).
        for kind in ["tcp", "udp", "rr"] {
            let args = format!("compare {kind} --busy-poll both --engines syscall");
            assert!(parse(&args).is_ok(), "{args}");
        }
        assert!(parse("compare tcp --repeat x").is_err());
    }

    #[test]
    fn issue_8_preload_adds_a_syscall_run_and_refuses_a_missing_library() {
        let lib = std::env::temp_dir().join(format!("lr-preload-{}.so", std::process::id()));
        std::fs::write(&lib, b"not really a library").expect("temp file");
        let args = format!(
            "compare rr -p 5999 --engines syscall --busy-poll both --preload {}",
            lib.display()
        );
        let Ok(Command::Compare(c)) = parse(&args) else {
            panic!("{args} parses")
        };
        let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "syscall",
                "syscall+preload",
                "syscall+busy-poll",
                "syscall+preload+busy-poll"
            ]
        );
        let p = c.variants[3].preload.as_ref().expect("a preload run");
        assert_eq!(p.lib, lib);
        assert_eq!(p.head, ["rr"]);
        // The embedded server's port is the child's; the user's is dropped.
        assert_eq!(p.tail, ["--engine", "syscall", "--busy-poll", "--json"]);
        let _ = std::fs::remove_file(&lib);
        let err = validate_compare(args::CompareArgs {
            engines: "syscall".into(),
            busy_poll: None,
            preload: Some("/nonexistent/libnope.so".into()),
            repeat: None,
            plot: None,
            report: None,
            output: args::OutputArgs {
                json: false,
                json_lines: false,
                csv: false,
            },
            test: vec!["tcp".into()],
        })
        .expect_err("a missing library is refused");
        assert!(
            err.to_string()
                .contains("/nonexistent/libnope.so does not exist"),
            "{err}"
        );
    }

    #[test]
    fn a_remote_host_keeps_its_port_for_the_preloaded_child() {
        let lib = std::env::temp_dir().join(format!("lr-preload2-{}.so", std::process::id()));
        std::fs::write(&lib, b"x").expect("temp file");
        let args = format!(
            "compare 192.0.2.1 udp -p 6000 -b 1M --engines syscall --preload {}",
            lib.display()
        );
        let Ok(Command::Compare(c)) = parse(&args) else {
            panic!("{args} parses")
        };
        let p = c.variants[1].preload.as_ref().expect("a preload run");
        assert_eq!(p.head, ["udp", "192.0.2.1"]);
        assert_eq!(
            p.tail,
            ["-p", "6000", "-b", "1M", "--engine", "syscall", "--json"]
        );
        let _ = std::fs::remove_file(&lib);
    }
}
