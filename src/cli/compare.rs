//! `linerate compare [HOST] tcp|udp|rr|crr [test flags] --engines A,B,…
//! [--threading per-flow,loop:T,…] [--busy-poll both] [--preload LIB]
//! [--repeat N] [--plot FILE.svg] [--report FILE.html]`: the flags of one
//! test, validated once per variant through the same path as the test
//! itself. The variants are every busy-polling setting × threading model
//! × engine (and the preloaded run per model), each the test's flags plus
//! the flags that select it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::threading::{self, Model};
use linerate_run::config::{ClientConfig, Target};

use super::args;
use super::command::{Command, CompareConfig, CompareVariantConfig, PreloadRun};
use super::test_line;
use super::values::format_of;

/// The test kinds compare runs.
const KINDS: &[&str] = &["tcp", "udp", "rr", "crr"];

/// Compare's own flags that take a value. clap leaves everything after the
/// test kind in `test`, so these are taken out of it here (they may also
/// come before the kind, where clap parses them).
const VALUE_FLAGS: &[&str] = &[
    "--engines",
    "--threading",
    "--preload",
    "--repeat",
    "--plot",
    "--report",
];

fn set_flag(a: &mut args::CompareArgs, flag: &str, v: String) -> Result<()> {
    match flag {
        "--engines" => a.engines = Some(v),
        "--threading" => a.threading = Some(v),
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

/// `-s`, `--size`, `--sizes` (with their value joined or not): rr's size.
fn is_size_flag(w: &str) -> bool {
    matches!(w, "-s" | "--size" | "--sizes")
        || w.starts_with("--size=")
        || w.starts_with("--sizes=")
        || (w.starts_with("-s") && !w.starts_with("--"))
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
            "compare needs a test: linerate compare [HOST] tcp|udp|rr|crr [test flags] --engines A,B"
        );
    };
    if !KINDS.contains(&kind.as_str()) {
        bail!("compare runs tcp, udp, rr or crr, not {kind:?}");
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
    let shown = rest.clone();
    let threading = threading::threading(a.threading.as_deref(), &mut rest)?;
    // rr runs 8 sizes thread-per-flow and one on event loops by default:
    // under --threading every model runs the loops' one (1 byte) unless
    // the test names its size.
    if threading.is_some() && kind == "rr" && !rest.iter().any(|w| is_size_flag(w)) {
        rest.extend(["--sizes".into(), "1".into()]);
    }
    let test = Test { host, kind, rest };
    test.check_busy_poll(&busy)?;
    let preload = a.preload.as_deref().map(preload_lib).transpose()?;
    let engines = engine_list(a.engines.as_deref(), threading.is_some())?;
    // The test's own flags are checked once, with the plain engine, so a
    // mistake there is a usage error rather than a row of failures; so is
    // a threading model the test cannot run (event loops of a kind that
    // has none, busy polling on them).
    let models: Vec<Option<Model>> = match &threading {
        Some(t) => t.models.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let flows = threading.as_ref().map(|t| t.flows);
    for (m, b) in models
        .iter()
        .flatten()
        .flat_map(|m| busy.iter().map(move |b| (m, b)))
    {
        test.one(&m.flags(flows.unwrap_or(1)), "syscall", *b)
            .with_context(|| format!("--threading {}", m.name()))?;
    }
    test.one(&[], "syscall", false)?;
    // The engine is part of a variant's name unless --threading alone
    // chose it.
    let named = a.engines.is_some() || threading.is_none();
    let mut variants = Vec::new();
    for b in &busy {
        let suffix = if *b { "+busy-poll" } else { "" };
        for m in &models {
            let extra = m.map_or_else(Vec::new, |m| m.flags(flows.unwrap_or(1)));
            let model = m.map(Model::name);
            let name = |engine: &str| {
                let parts = [named.then_some(engine), model.as_deref()];
                parts.into_iter().flatten().collect::<Vec<_>>().join("/")
            };
            for e in &engines {
                variants.push(CompareVariantConfig {
                    name: format!("{}{suffix}", name(e)),
                    engine: e.clone(),
                    busy_poll: *b,
                    threading: model.clone(),
                    config: test.one(&extra, e, *b).map_err(|e| format!("{e:#}")),
                    preload: None,
                });
            }
            if let Some(lib) = &preload {
                let mut v = preload_variant(&test, &extra, lib, *b);
                v.name = format!("{}+preload{suffix}", name("syscall"));
                v.threading = model.clone();
                variants.push(v);
            }
        }
    }
    Ok(Command::Compare(CompareConfig {
        test: test.kind,
        args: shown,
        flows,
        variants,
        format: format_of(&a.output),
        repeat,
        plot: a.plot,
        report: a.report,
    }))
}

/// `--engines`: the engines of the variants. The default with
/// `--threading` (`threading`) alone is one engine, so the rows differ by
/// their threading only (event loops run syscall everywhere).
fn engine_list(flag: Option<&str>, threading: bool) -> Result<Vec<String>> {
    let default = if threading {
        "syscall"
    } else {
        "syscall,batch,uring,zerocopy"
    };
    let engines: Vec<String> = flag
        .unwrap_or(default)
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect();
    if engines.is_empty() {
        bail!("--engines: no engines given");
    }
    Ok(engines)
}

/// The test compare runs: its host, kind and flags (without compare's own
/// and without the flow count --threading sets per model).
struct Test {
    host: Option<String>,
    kind: String,
    rest: Vec<String>,
}

impl Test {
    /// Whether the test busy-polls is its own flags' business: asked
    /// once, so a test kind that gains --busy-poll is compared both ways
    /// with no change here.
    fn check_busy_poll(&self, busy: &[bool]) -> Result<()> {
        if !busy.contains(&true) {
            return Ok(());
        }
        if let Err(e) = self.one(&[], "syscall", true) {
            let unknown = e
                .downcast_ref::<clap::Error>()
                .is_some_and(|c| c.kind() == clap::error::ErrorKind::UnknownArgument);
            if unknown {
                bail!(
                    "--busy-poll: {} tests do not take --busy-poll, so compare cannot run them both ways",
                    self.kind
                );
            }
            bail!("--busy-poll: {e:#}");
        }
        Ok(())
    }

    /// One variant's test config, through the test's own validation: the
    /// test's flags, then `extra` (a threading model's), the engine and
    /// busy polling.
    fn one(&self, extra: &[String], engine: &str, busy_poll: bool) -> Result<ClientConfig> {
        let mut argv = vec!["linerate".to_string(), self.kind.clone()];
        argv.extend(self.host.iter().cloned());
        argv.extend(self.rest.iter().cloned());
        argv.extend(extra.iter().cloned());
        argv.extend(["--engine".into(), engine.into()]);
        if busy_poll {
            argv.push("--busy-poll".into());
        }
        let cli = <args::Cli as clap::Parser>::try_parse_from(argv)?;
        match test_line::validate(cli)? {
            Command::Tcp(c) | Command::Udp(c) => Ok(c),
            // Its client config would run the test over TCP instead.
            Command::Rr(r) if r.local.is_some() => bail!(
                "--transport {}: compare runs tests over the network; a local transport runs \
                 both ends on this host (run `linerate {} --transport …` on its own)",
                r.local.map_or("", |t| t.name()),
                self.kind
            ),
            Command::Rr(r) => Ok(r.client),
            _ => bail!("internal: compare's test is not a client test"),
        }
    }
}

/// The `--preload` variant: the syscall engine (the one that works under
/// kernel-bypass libraries), its client in a child process; `extra`: its
/// threading model's flags.
fn preload_variant(test: &Test, extra: &[String], lib: &Path, busy: bool) -> CompareVariantConfig {
    let config = test
        .one(extra, "syscall", busy)
        .map_err(|e| format!("{e:#}"));
    let embedded = matches!(&config, Ok(c) if matches!(c.target, Target::Embedded));
    let mut head = vec![test.kind.clone()];
    head.extend(test.host.iter().cloned());
    let mut tail = if embedded {
        without_port(&test.rest)
    } else {
        test.rest.clone()
    };
    tail.extend(extra.iter().cloned());
    tail.extend(["--engine".into(), "syscall".into()]);
    if busy {
        tail.push("--busy-poll".into());
    }
    tail.push("--json".into());
    CompareVariantConfig {
        name: "syscall+preload".into(),
        engine: "syscall".into(),
        busy_poll: busy,
        threading: None,
        config,
        preload: Some(PreloadRun {
            lib: lib.to_owned(),
            head,
            tail,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_from;
    use linerate_proto::spec::TestSpec;

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
            engines: Some("syscall".into()),
            threading: None,
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

    fn compare(args: &str) -> CompareConfig {
        match parse(args) {
            Ok(Command::Compare(c)) => c,
            other => panic!("{args}: {other:?}"),
        }
    }

    #[test]
    fn issue_26_threading_is_a_variant_axis_each_model_through_the_test() {
        let c = compare("compare 127.0.0.1 tcp --flows 8 --threading per-flow,loop:2,loop:1 -t 1");
        let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["per-flow", "loop:2", "loop:1"]);
        assert_eq!(c.flows, Some(8));
        // The flags as given, the flow count included.
        assert_eq!(c.args, ["--flows", "8", "-t", "1"]);
        let spec = |i: usize| {
            let v = &c.variants[i];
            assert_eq!(v.engine, "syscall", "{}", v.name);
            assert_eq!(v.threading.as_deref(), Some(v.name.as_str()));
            v.config.as_ref().expect("runs").spec.clone()
        };
        let (per, two, one) = (spec(0), spec(1), spec(2));
        assert_eq!((per.streams, per.flows), (8, None));
        let flows = |s: &TestSpec| s.flows.map(|f| (f.count, f.threads));
        assert_eq!(flows(&two), Some((8, 2)));
        assert_eq!(flows(&one), Some((8, 1)));
        // -P N is the same count; rr runs the loops' one size in every
        // model unless it names one.
        let c = compare("compare rr -P 4 -t 1 --threading per-flow,loop:1");
        for v in &c.variants {
            let rr = v
                .config
                .as_ref()
                .expect("runs")
                .spec
                .rr
                .clone()
                .expect("rr");
            assert_eq!(rr.sizes, [1], "{}", v.name);
        }
        let c = compare("compare rr -s 64 --flows 4 --threading per-flow,loop:1");
        let rr = c.variants[0].config.as_ref().expect("runs").spec.rr.clone();
        assert_eq!(rr.expect("rr").sizes, [64]);
        // crr too (a connection per transaction on either model).
        assert_eq!(
            compare("compare crr --flows 4 --threading per-flow,loop:2")
                .variants
                .len(),
            2
        );
        // With --engines: every engine under every model.
        let c =
            compare("compare tcp --flows 4 --threading per-flow,loop:1 --engines syscall,batch");
        let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "syscall/per-flow",
                "batch/per-flow",
                "syscall/loop:1",
                "batch/loop:1"
            ]
        );
        // --preload: the preloaded run under every model, its child
        // given the model's flags.
        let lib = std::env::temp_dir().join(format!("lr-preload3-{}.so", std::process::id()));
        std::fs::write(&lib, b"x").expect("temp file");
        let c = compare(&format!(
            "compare rr -p 5999 --flows 2 --threading per-flow,loop:1 --preload {}",
            lib.display()
        ));
        let _ = std::fs::remove_file(&lib);
        let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["per-flow", "per-flow+preload", "loop:1", "loop:1+preload"]
        );
        assert_eq!(c.variants[3].threading.as_deref(), Some("loop:1"));
        let p = c.variants[3].preload.as_ref().expect("a preload run");
        assert_eq!(
            p.tail,
            [
                "--sizes",
                "1",
                "--flows",
                "2",
                "--threads",
                "1",
                "--engine",
                "syscall",
                "--json"
            ]
        );
        // Without --threading nothing changes.
        let c = compare("compare tcp -P 2 --engines syscall");
        assert_eq!((c.flows, c.variants[0].threading.clone()), (None, None));
        assert_eq!(c.variants[0].config.as_ref().expect("runs").spec.streams, 2);
    }

    #[test]
    fn issue_26_threading_models_a_test_cannot_run_are_refused_with_the_reason() {
        for (args, why) in [
            ("compare tcp --flows 4 --threading loop:0", "whole number"),
            (
                "compare tcp --flows 4 --threading epoll",
                "not a threading model",
            ),
            (
                "compare tcp -t 1 --threading per-flow",
                "needs the flow count",
            ),
            // What the test refuses on event loops, refused per model.
            (
                "compare tcp --flows 4 --threading per-flow,loop:1 --busy-poll both",
                "--threading loop:1: --flows waits in epoll",
            ),
            (
                "compare udp --flows 4 --priority 5 --threading per-flow,loop:2",
                "--threading loop:2: --priority renices receiving stream threads",
            ),
            // Local transports: no event loops, and not compare's to run.
            (
                "compare rr --transport shm --flows 2 --threading loop:1",
                "a local --transport shm-direct runs a thread per flow",
            ),
            (
                "compare rr --transport shm -t 1",
                "compare runs tests over the network",
            ),
            (
                "rr --transport shm --flows 2",
                "--flows: a local --transport",
            ),
            (
                "compare tcp --flows 100000 --threading per-flow",
                "-P runs at most 65535",
            ),
        ] {
            let e = parse(args).expect_err(args);
            assert!(e.to_string().contains(why), "{args}: {e}");
        }
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
