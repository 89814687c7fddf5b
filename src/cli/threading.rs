//! `compare --threading per-flow,loop:T,…`: the threading models compare
//! runs a test under, each the same N flows (from the test's `--flows N`
//! or `-P N`), as typed (a list of words) → validated ([`Threading`]).
//! A model is the test flags it adds, so every model's config goes through
//! the test's own validation, as every engine's does.

use anyhow::{bail, Context, Result};

/// One way of running a test's N flows on each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Model {
    /// A thread (and connection) per flow: `-P N`.
    PerFlow,
    /// The flows on T event-loop threads per side: `--flows N --threads T`.
    Loop(u16),
}

impl Model {
    /// The model as the user spells it (and as its variant is named).
    pub(super) fn name(self) -> String {
        match self {
            Model::PerFlow => "per-flow".into(),
            Model::Loop(t) => format!("loop:{t}"),
        }
    }

    /// The test flags that run `flows` flows this way.
    pub(super) fn flags(self, flows: u32) -> Vec<String> {
        match self {
            Model::PerFlow => vec!["-P".into(), flows.to_string()],
            Model::Loop(t) => vec![
                "--flows".into(),
                flows.to_string(),
                "--threads".into(),
                t.to_string(),
            ],
        }
    }

    fn parse(word: &str) -> Result<Model> {
        if word == "per-flow" {
            return Ok(Model::PerFlow);
        }
        let Some(t) = word.strip_prefix("loop:") else {
            bail!(
                "--threading: {word:?} is not a threading model: per-flow (a thread per flow, \
                 as -P) or loop:T (T event-loop threads per side, as --flows --threads T)"
            );
        };
        match t.parse::<u16>() {
            Ok(t) if t >= 1 => Ok(Model::Loop(t)),
            _ => bail!(
                "--threading {word}: T is the event-loop threads per side, a whole number \
                 1..={}",
                u16::MAX
            ),
        }
    }
}

/// The validated `--threading`: its models in order, and the flow count
/// every model runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Threading {
    pub models: Vec<Model>,
    pub flows: u32,
}

/// `--threading LIST` with the test's flags `rest`: the models, and the
/// flow count taken out of `rest` (`--flows N` or `-P N`, one of them:
/// each model sets its own). `None` without `--threading`.
pub(super) fn threading(list: Option<&str>, rest: &mut Vec<String>) -> Result<Option<Threading>> {
    let Some(list) = list else {
        return Ok(None);
    };
    let models = list
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(Model::parse)
        .collect::<Result<Vec<_>>>()?;
    if models.is_empty() {
        bail!("--threading: no models given (per-flow, loop:T)");
    }
    if take_value(rest, None, "--threads").is_some() {
        bail!("--threads: --threading sets each model's event-loop threads (loop:T)");
    }
    let flows = take_value(rest, None, "--flows");
    let parallel = take_value(rest, Some('P'), "--parallel");
    let n = match (flows, parallel) {
        (Some(_), Some(_)) => {
            bail!("--threading: give the flow count once, as --flows N (or -P N), not both")
        }
        (Some(n), None) | (None, Some(n)) => n,
        (None, None) => bail!(
            "--threading needs the flow count every model runs: --flows N (or -P N) in the \
             test's flags"
        ),
    };
    let flows: u32 = n
        .parse()
        .ok()
        .filter(|&n| n >= 1)
        .with_context(|| format!("--flows: {n:?} is not a flow count (1 or more)"))?;
    if models.contains(&Model::PerFlow) && flows > u32::from(u16::MAX) {
        bail!(
            "--threading per-flow: {flows} flows would be {flows} threads per side; -P runs at \
             most {} (use loop:T alone)",
            u16::MAX
        );
    }
    Ok(Some(Threading { models, flows }))
}

/// Takes every `--long V`, `--long=V`, `-S V` and `-SV` out of `rest`;
/// the last value given, as clap keeps it.
fn take_value(rest: &mut Vec<String>, short: Option<char>, long: &str) -> Option<String> {
    let short = short.map(|c| format!("-{c}"));
    let mut value = None;
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].as_str();
        let joined = w
            .strip_prefix(long)
            .and_then(|v| v.strip_prefix('='))
            .or_else(|| {
                short
                    .as_deref()
                    .and_then(|s| w.strip_prefix(s))
                    .filter(|v| !v.is_empty())
            });
        if let Some(v) = joined {
            value = Some(v.to_owned());
            rest.remove(i);
        } else if w == long || short.as_deref() == Some(w) {
            value = Some(rest.get(i + 1).cloned().unwrap_or_default());
            rest.drain(i..(i + 2).min(rest.len()));
        } else {
            i += 1;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn issue_26_threading_models_parse_and_take_the_flow_count_out_of_the_test() {
        for test in [
            "-t 1 --flows 64",
            "--flows=64 -t 1",
            "-P 64 -t 1",
            "-P64 -t 1",
            "--parallel=64 -t 1",
        ] {
            let mut rest = words(test);
            let t = threading(Some("per-flow, loop:2,loop:1"), &mut rest)
                .expect(test)
                .expect("some");
            assert_eq!(
                t.models,
                [Model::PerFlow, Model::Loop(2), Model::Loop(1)],
                "{test}"
            );
            assert_eq!(t.flows, 64, "{test}");
            assert_eq!(rest, ["-t", "1"], "{test}");
        }
        assert_eq!(Model::PerFlow.flags(8), ["-P", "8"]);
        assert_eq!(Model::Loop(2).flags(8), ["--flows", "8", "--threads", "2"]);
        assert_eq!(Model::Loop(2).name(), "loop:2");
        let mut rest = words("-t 1");
        assert_eq!(threading(None, &mut rest).expect("none"), None);
    }

    #[test]
    fn issue_26_threading_refuses_bad_spellings_and_counts_with_the_reason() {
        for (list, test, why) in [
            ("loop:0", "--flows 8", "whole number 1..=65535"),
            ("loop:", "--flows 8", "whole number"),
            ("loop:x", "--flows 8", "whole number"),
            ("loop:70000", "--flows 8", "whole number"),
            ("loop2", "--flows 8", "is not a threading model"),
            ("per_flow", "--flows 8", "is not a threading model"),
            ("threads", "--flows 8", "is not a threading model"),
            (",", "--flows 8", "no models given"),
            ("per-flow", "-t 1", "needs the flow count"),
            ("per-flow", "--flows 8 -P 8", "not both"),
            ("loop:1", "--flows 8 --threads 2", "sets each model's"),
            ("loop:1", "--flows 0", "is not a flow count"),
            ("loop:1", "--flows many", "is not a flow count"),
            ("per-flow,loop:2", "--flows 70000", "-P runs at most 65535"),
        ] {
            let err = threading(Some(list), &mut words(test))
                .expect_err(list)
                .to_string();
            assert!(err.contains(why), "{list} {test}: {err}");
        }
        // Event loops alone take more flows than -P could.
        let t = threading(Some("loop:2"), &mut words("--flows 70000"))
            .expect("loops")
            .expect("some");
        assert_eq!(t.flows, 70000);
    }
}
