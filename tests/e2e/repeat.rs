//! `--repeat N` (issue 11): the summary's statistics are those of the
//! trials' own figures, recomputed here; progress bars only on a terminal,
//! and cleared on Ctrl-C (issue 28).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::*;

/// Mean, sample standard deviation and the 95% interval: Student t
/// quantiles for 2 and 3 degrees of freedom (NIST table), taken on the log
/// scale for these positive figures, an interval of the geometric mean
/// (Bland & Altman, BMJ 1996;312:1079; issue 28: never below zero).
fn reference(values: &[f64]) -> (f64, f64, f64, f64) {
    let mean_sd = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        (mean, sd)
    };
    let (mean, sd) = mean_sd(values);
    let t = match values.len() {
        3 => 4.303,
        4 => 3.182,
        n => panic!("no reference quantile for {n} trials"),
    };
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let (m, s) = mean_sd(&logs);
    let half = t * s / (values.len() as f64).sqrt();
    (mean, sd, (m - half).exp(), (m + half).exp())
}

fn figure<'a>(r: &'a Value, group: &str, name: &str) -> &'a Value {
    r["figures"]
        .as_array()
        .expect("figures")
        .iter()
        .find(|f| f["group"] == group && f["name"] == name)
        .unwrap_or_else(|| panic!("no figure {group} {name} in {r}"))
}

fn check_stats(fig: &Value, values: &[f64]) {
    let (mean, sd, low, high) = reference(values);
    let s = &fig["stats"];
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(near(f(&s["mean"]), mean), "{fig}");
    assert!(near(f(&s["sd"]), sd), "{fig}");
    assert!(near(f(&s["ci95_low"]), low), "{fig}");
    assert!(near(f(&s["ci95_high"]), high), "{fig}");
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_eq!((f(&s["min"]), f(&s["max"])), (min, max));
}

#[test]
fn issue_11_repeat_tcp_statistics_match_the_trials() {
    let out = run_client(
        &["tcp", "-t", "0.3", "--repeat", "3", "--json-lines"],
        Duration::from_secs(60),
    );
    assert_ok(&out, &["tcp --repeat 3"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 4, "three trials and a summary");
    let trials: Vec<f64> = lines[..3]
        .iter()
        .map(|l| {
            assert_eq!(l["type"], "trial");
            f(&l["report"]["sums"][0]["receiver_bits_per_second"])
        })
        .collect();
    let summary = &lines[3];
    assert_eq!(summary["type"], "summary");
    assert_eq!((u(&summary["repeat"]), u(&summary["completed"])), (3, 3));
    let fig = figure(summary, "client→server", "receiver bit/s");
    let values: Vec<f64> = fig["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(f)
        .collect();
    assert_eq!(values, trials, "the summary holds each trial's own figure");
    check_stats(fig, &values);
}

#[test]
fn issue_11_repeat_rr_per_size() {
    let r = json_client(&[
        "rr", "--sizes", "1,100", "-t", "0.2", "--repeat", "3", "--json",
    ]);
    assert_eq!(u(&r["completed"]), 3);
    for size in ["1 B", "100 B"] {
        let fig = figure(&r, size, "transactions/s");
        let values: Vec<f64> = fig["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(f)
            .collect();
        assert_eq!(values.len(), 3);
        assert!(values.iter().all(|v| *v > 0.0));
        check_stats(fig, &values);
        figure(&r, size, "rtt p99");
    }
}

#[test]
fn issue_11_repeat_progress_bar_only_on_a_terminal() {
    // Off a terminal (this pipe): trial lines, no bar.
    let out = run_client(
        &["udp", "-t", "0.2", "--repeat", "2"],
        Duration::from_secs(60),
    );
    assert_ok(&out, &["udp --repeat 2"]);
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(
        all.contains("trial 2/2 done") && !all.contains("ETA"),
        "{all}"
    );
    // On a terminal (tmux): the bar with its ETA.
    if Command::new("tmux").arg("-V").output().is_err() {
        skip_part("terminal", "tmux is not installed");
        return;
    }
    bar_on_terminal(&format!("{} tcp -t 0.3 --repeat 20", bin()), "trials [");
    bar_on_terminal(
        &format!("{} rr --sizes 1,2,3,4,5,6 -t 0.5", bin()),
        "sizes [",
    );
    bar_on_terminal(
        &format!("{} sweep udp --sizes 1000 --pps 1k:10k:1k -t 0.3", bin()),
        "sweep [",
    );
}

#[test]
fn issue_13_rr_progress_time_left_by_the_clock_and_quiet_otherwise() {
    // Off a terminal: no bar, time- or count-limited.
    let args = ["rr", "--sizes", "1,2", "-n", "200"];
    let out = run_client(&args, Duration::from_secs(60));
    assert_ok(&out, &args);
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!all.contains("ETA") && !all.contains("sizes ["), "{all}");
    if Command::new("tmux").arg("-V").output().is_err() {
        skip_part("terminal", "tmux is not installed");
        return;
    }
    // Time-limited: the total is known from the start, so the time left
    // shows in seconds before any size has ended.
    let seen = on_terminal(
        &format!("{} rr --sizes 1,2,3,4,5,6 -t 2", bin()),
        &["sizes [", "0/6", "elapsed, ETA 1"],
    );
    assert!(!seen.contains("after the first size"), "{seen}");
    // Count-limited: no estimate until a size has ended, then one from the
    // rate so far (the message is set before the position moves). Each
    // size lasts two seconds or more, so the capture sees "1/3".
    let seen = on_terminal(
        &format!("{} rr --sizes 1,2,3 -n 40000", bin()),
        &["sizes [", "1/3"],
    );
    let line = seen.lines().find(|l| l.contains("1/3")).unwrap_or("");
    let eta = line.split("ETA ").nth(1).unwrap_or("");
    assert!(eta.starts_with(|c: char| c.is_ascii_digit()), "{seen}");
    // A machine format on a terminal: stderr is a terminal, still no bar.
    let seen = on_terminal(
        &format!(
            "{} rr --sizes 1,2,3 -t 0.5 --json > /dev/null; echo lr-done-$((6 * 7))",
            bin()
        ),
        &["lr-done-42"],
    );
    assert!(!seen.contains("sizes [") && !seen.contains("ETA"), "{seen}");
}

#[test]
fn issue_28_progress_bars_are_cleared_on_ctrl_c() {
    if Command::new("tmux").arg("-V").output().is_err() {
        return skip("tmux is not installed");
    }
    // Ctrl-C once the bar shows: the run reports what it measured and
    // ends, and no bar is left on the screen.
    for (cmd, bar) in [
        (
            format!("{} sweep udp --sizes 1000 --pps 1k:4k:1k -t 2", bin()),
            "sweep [",
        ),
        (format!("{} rr --sizes 1,2,3 -t 2", bin()), "sizes ["),
        (format!("{} tcp -t 2 --repeat 4", bin()), "trials ["),
    ] {
        let seen = interrupt_on_terminal(&cmd, bar);
        assert!(seen.contains("interrupted"), "{seen}");
        assert!(!seen.contains(bar) && !seen.contains("ETA"), "{seen}");
    }
}

/// Runs `cmd` in a detached tmux terminal, presses Ctrl-C once `needle`
/// shows, and returns the screen once the command has ended.
fn interrupt_on_terminal(cmd: &str, needle: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let session = format!(
        "lr-interrupt-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    // The shell traps SIGINT (so it runs on to the marker); the command
    // gets the default disposition back and installs its own handler.
    let cmd = format!("trap true INT; {cmd}; echo lr-done-$((6 * 7)); sleep 30");
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &session])
            .args(args)
            .output()
            .expect("tmux")
    };
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "160",
        "-y",
        "30",
        &cmd,
    ]);
    assert!(started.status.success(), "tmux new-session failed");
    let screen = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &session]).stdout).into_owned()
    };
    let wait_for = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = screen();
        while !seen.contains(needle) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            seen = screen();
        }
        seen
    };
    let before = wait_for(needle);
    let _ = tmux(&["send-keys", "-t", &session, "C-c"]);
    let after = wait_for("lr-done-42");
    let _ = tmux(&["kill-server"]);
    assert!(
        before.contains(needle),
        "no {needle:?} for {cmd}:\n{before}"
    );
    assert!(after.contains("lr-done-42"), "{cmd} did not end:\n{after}");
    after
}

/// Runs `cmd` in a detached tmux terminal and waits for a bar `needle` with an ETA.
fn bar_on_terminal(cmd: &str, needle: &str) {
    let _ = on_terminal(cmd, &[needle, "ETA"]);
}

/// Runs `cmd` in a detached tmux terminal until its screen shows every needle.
pub fn on_terminal(cmd: &str, needles: &[&str]) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let session = format!(
        "lr-progress-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let cmd = format!("{cmd}; sleep 30");
    // A tmux server of this session's own (-L): other tmux users on the
    // machine, or a concurrent test run, cannot interfere.
    let started = Command::new("tmux")
        .args([
            "-L",
            &session,
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "160",
            "-y",
            "20",
            &cmd,
        ])
        .status()
        .expect("tmux");
    assert!(started.success(), "tmux new-session failed");
    // Generous for a loaded machine: the bar shows for several seconds.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        let cap = Command::new("tmux")
            .args(["-L", &session, "capture-pane", "-p", "-t", &session])
            .output()
            .expect("capture");
        // Once the command and its pause have ended the session is gone
        // and the capture is empty: keep the last screen seen for the
        // failure message.
        let screen = String::from_utf8_lossy(&cap.stdout).into_owned();
        if !screen.trim().is_empty() {
            seen = screen;
        }
        if needles.iter().all(|n| seen.contains(n)) {
            break;
        }
    }
    let _ = Command::new("tmux")
        .args(["-L", &session, "kill-server"])
        .status();
    assert!(
        needles.iter().all(|n| seen.contains(n)),
        "{needles:?} not on the terminal for {cmd}:\n{seen}"
    );
    seen
}
