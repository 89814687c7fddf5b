//! `linerate completions SHELL` and `linerate man`: shell completions and a
//! roff man page generated from the clap definitions, so they cannot drift
//! from the flags.

use anyhow::{Context, Result};
use clap::Args;
use clap_complete::Shell;

use super::command::Command;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: Shell,
}

/// Completions for `shell` of the command line `cmd` (linerate's, from
/// the clap definitions), as text to print.
pub fn completions(a: &CompletionsArgs, mut cmd: clap::Command) -> Result<Command> {
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "linerate", &mut out);
    Ok(Command::Print(out))
}

/// The man page (roff): linerate(1) with every subcommand's flags, nested
/// ones (`sweep udp`) included.
pub fn man(cmd: clap::Command) -> Result<Command> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .context("rendering the man page")?;
    // One page: the top level, then each subcommand's options as sections.
    for sub in cmd.get_subcommands() {
        section(&mut out, "linerate", sub)?;
    }
    Ok(Command::Print(out))
}

/// Appends `sub`'s section (named by its path, e.g. "linerate sweep"),
/// then its own subcommands' sections.
fn section(out: &mut Vec<u8>, parent: &str, sub: &clap::Command) -> Result<()> {
    let path = format!("{parent} {}", sub.get_name());
    let mut page = Vec::new();
    clap_mangen::Man::new(sub.clone())
        .render(&mut page)
        .context("rendering the man page")?;
    // Drop the subpage's own .TH header line; keep its sections.
    let text = String::from_utf8_lossy(&page);
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with(".TH") && !l.starts_with(".ie") && !l.starts_with(".el"))
        .map(|l| {
            // Section headings become subsections under one heading.
            match l.strip_prefix(".SH ") {
                Some(h) => format!(".SS \"{path} — {}\"\n", h.trim_matches('"')),
                None => format!("{l}\n"),
            }
        })
        .collect();
    out.extend_from_slice(format!(".SH \"{}\"\n", path.to_uppercase()).as_bytes());
    out.extend_from_slice(body.as_bytes());
    for nested in sub.get_subcommands().filter(|c| c.get_name() != "help") {
        section(out, &path, nested)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_from;

    fn print(args: &[&str]) -> String {
        let argv = std::iter::once("linerate")
            .chain(args.iter().copied())
            .map(str::to_owned);
        match parse_from(argv) {
            Ok(Command::Print(b)) => String::from_utf8(b).expect("utf-8"),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn completions_name_every_subcommand() {
        let bash = print(&["completions", "bash"]);
        for sub in [
            "tcp", "udp", "rr", "crr", "sweep", "iface", "doctor", "ping", "server",
        ] {
            assert!(bash.contains(sub), "bash completions lack {sub}");
        }
        assert!(bash.contains("--repeat") && bash.contains("--iface"));
        assert!(print(&["completions", "zsh"]).contains("#compdef linerate"));
        assert!(print(&["completions", "fish"]).contains("complete -c linerate"));
        assert!(parse_from(["linerate", "completions", "tcsh"].map(str::to_owned)).is_err());
    }

    #[test]
    fn man_page_has_every_subcommand() {
        let man = print(&["man"]);
        assert!(
            man.starts_with(".ie") || man.contains(".TH linerate"),
            "{}",
            &man[..200]
        );
        for sub in ["TCP", "UDP", "RR", "IFACE", "DOCTOR", "PING"] {
            assert!(
                man.contains(&format!(".SH \"LINERATE {sub}\"")),
                "man lacks {sub}"
            );
        }
        assert!(man.contains("repeat"));
        // Nested subcommands have their own section with their flags
        // (issue 11): `sweep udp` is where --sizes and --rates live.
        let at = man
            .find(".SH \"LINERATE SWEEP UDP\"")
            .expect("man lacks sweep udp");
        let sweep_udp = &man[at..];
        let end = sweep_udp[4..]
            .find(".SH ")
            .map_or(sweep_udp.len(), |e| e + 4);
        let sweep_udp = &sweep_udp[..end];
        for flag in ["sizes", "rates", "find\\-zero\\-loss"] {
            assert!(sweep_udp.contains(flag), "sweep udp section lacks {flag}");
        }
    }
}
