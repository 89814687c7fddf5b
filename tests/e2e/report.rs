//! `--report FILE.html` (issue 11): the page renders in headless Chromium
//! without console messages, and its plots are visible (the screenshot has
//! coloured plot pixels: the page itself is grey-scale, only plots are in
//! colour). Skips with a printed reason where Chromium is not installed
//! (`.ci/run` installs Debian's package).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::helpers::*;

pub(crate) fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

pub(crate) fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lr-report-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Renders `page` and returns the coloured pixels of its screenshot.
pub(crate) fn render(browser: &str, page: &Path, dir: &Path) -> usize {
    let shot = dir.join("shot.png");
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--screenshot={}", shot.display()))
        .args([
            "--window-size=1200,1500",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", stderr(&out));
    // The page has no scripts and loads nothing: any console message (a
    // blocked resource, a parse error) is a defect.
    let console: Vec<&str> = std::str::from_utf8(&out.stderr)
        .unwrap_or("")
        .lines()
        .filter(|l| {
            l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("Failed to load resource")
        })
        .collect();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        console.is_empty(),
        "console messages rendering {}: {console:?}\n{log}",
        page.display()
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("screenshot"),
    ));
    let mut reader = decoder.read_info().expect("png");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("frame");
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    buf[..info.buffer_size()]
        .chunks_exact(channels)
        .filter(|p| {
            let (mx, mn) = (p[0].max(p[1]).max(p[2]), p[0].min(p[1]).min(p[2]));
            mx - mn > 80
        })
        .count()
}

fn report_of(args: &[&str], dir: &Path) -> PathBuf {
    let page = dir.join("report.html");
    let page_s = page.to_str().expect("path").to_owned();
    let mut full: Vec<&str> = args.to_vec();
    full.extend(["--report", &page_s]);
    let out = run_client(&full, Duration::from_secs(90));
    assert_ok(&out, &full);
    let html = std::fs::read_to_string(&page).expect("page written");
    assert!(
        html.contains("<svg class=\"plot\""),
        "no inline plot in {}",
        page.display()
    );
    for needle in [
        "--report",
        "linerate 0.1",
        "engines",
        "kernel",
        "Settings (linerate doctor)",
    ] {
        assert!(html.contains(needle), "page lacks {needle:?}");
    }
    assert!(
        !html.contains("<script") && !html.contains("src="),
        "the page must be self-contained"
    );
    page
}

#[test]
fn issue_11_html_report_renders_in_chromium_with_visible_plots() {
    let Some(browser) = chromium() else {
        return skip("Chromium is not installed (.ci/run installs Debian's chromium)");
    };
    let cases: [(&str, &[&str]); 5] = [
        ("tcp", &["tcp", "-t", "1"]),
        (
            "compare",
            &["compare", "tcp", "-t", "0.3", "--engines", "syscall,batch"],
        ),
        ("rr", &["rr", "--sizes", "1,64", "-t", "0.2"]),
        ("repeat", &["udp", "-t", "0.2", "--repeat", "2"]),
        (
            "sweep",
            &[
                "sweep", "udp", "--sizes", "200", "--pps", "1k,2k", "-t", "0.2",
            ],
        ),
    ];
    for (tag, args) in cases {
        let dir = scratch(tag);
        let page = report_of(args, &dir);
        let coloured = render(browser, &page, &dir);
        assert!(
            coloured > 300,
            "{tag}: the plot is not visible ({coloured} coloured pixels)"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn issue_11_report_to_an_unwritable_place_is_an_error() {
    let out = run_client(
        &["tcp", "-t", "0.2", "--report", "/nonexistent-dir/r.html"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("--report"), "{}", stderr(&out));
}
