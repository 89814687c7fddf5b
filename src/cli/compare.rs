//! `linerate compare [HOST] tcp|udp|rr [test flags] --engines A,B,…
//! [--busy-poll both]`: the flags of one test, validated once per variant
//! through the same path as the test itself.

use anyhow::{bail, Result};

use super::{
    args, format_of, validate, ClientConfig, Command, CompareConfig, CompareVariantConfig,
};

/// The test kinds compare runs.
const KINDS: &[&str] = &["tcp", "udp", "rr"];

/// Takes `--engines`, `--busy-poll both|on|off` and the output flags out
/// of the test's flags (clap leaves everything after the test kind there).
fn take_own_flags(rest: &mut Vec<String>, a: &mut args::CompareArgs) -> Result<()> {
    let mut i = 0;
    while i < rest.len() {
        let value = |i: usize| rest.get(i + 1).cloned();
        match rest[i].as_str() {
            "--engines" => {
                let Some(v) = value(i) else {
                    bail!("--engines needs a list, e.g. --engines syscall,uring")
                };
                a.engines = v;
                rest.drain(i..i + 2);
            }
            s if s.starts_with("--engines=") => {
                a.engines = s["--engines=".len()..].to_string();
                rest.remove(i);
            }
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
    let busy = match a.busy_poll.as_deref() {
        None | Some("off") => vec![false],
        Some("on") => vec![true],
        Some("both") => vec![false, true],
        Some(v) => bail!("--busy-poll: {v:?}; compare takes both, on or off"),
    };
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
        for e in &engines {
            let name = if *b {
                format!("{e}+busy-poll")
            } else {
                e.clone()
            };
            variants.push(CompareVariantConfig {
                name,
                engine: e.clone(),
                busy_poll: *b,
                config: one(&host, &kind, &rest, e, *b).map_err(|e| format!("{e:#}")),
            });
        }
    }
    Ok(Command::Compare(CompareConfig {
        test: kind,
        args: rest,
        variants,
        format: format_of(&a.output),
    }))
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
