//! `--report FILE.html`: one self-contained page to attach to a ticket —
//! the tables (the human output), the SVG plots inline, the host and
//! kernel description, the command line, linerate's version and both
//! sides' engines. No scripts, no external resources.

use std::fmt::Write as _;

/// What the page shows.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub title: String,
    /// The command line as typed (shell-quoted).
    pub command_line: String,
    pub version: String,
    /// `client syscall, server syscall`.
    pub engines: String,
    /// Generated at (UTC, ISO 8601).
    pub generated: String,
    /// (name, value) rows about the host and kernel.
    pub host: Vec<(String, String)>,
    /// One line per interface.
    pub interfaces: Vec<String>,
    /// (status, check, value) rows from `doctor`.
    pub checks: Vec<(String, String, String)>,
    pub sections: Vec<Section>,
}

/// A block of results.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    /// Preformatted text (a table as linerate prints it).
    pub text: Option<String>,
    /// An SVG document, drawn inline.
    pub svg: Option<String>,
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An SVG document made fit to sit inside HTML: without an XML
/// declaration or doctype, and scaling to the page width.
fn inline_svg(svg: &str) -> String {
    let start = svg.find("<svg").unwrap_or(0);
    let body = &svg[start..];
    body.replacen("<svg", "<svg class=\"plot\" role=\"img\"", 1)
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#111;background:#fff;max-width:1200px}\
pre{background:#f4f4f4;padding:1em;overflow-x:auto;font-size:12px;line-height:1.35}\
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px;vertical-align:top}\
th{background:#eee}.warn{font-weight:bold}svg.plot{width:100%;height:auto;max-width:1000px;display:block;border:1px solid #ddd}\
code{background:#f4f4f4;padding:0 4px}";

/// The page as one HTML document.
pub fn page(p: &Page) -> String {
    let mut h = String::new();
    let e = escape;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"generator\" content=\"{}\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        e(&p.version),
        e(&p.title)
    );
    let _ = writeln!(h, "<h1>{}</h1>", e(&p.title));
    let _ = writeln!(h, "<table id=\"run\">");
    for (k, v) in [
        ("command", format!("<code>{}</code>", e(&p.command_line))),
        ("linerate", e(&p.version)),
        ("engines", e(&p.engines)),
        ("generated", e(&p.generated)),
    ] {
        let _ = writeln!(h, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    let _ = writeln!(h, "</table>");
    for s in &p.sections {
        let _ = writeln!(h, "<h2>{}</h2>", e(&s.heading));
        if let Some(svg) = &s.svg {
            let _ = writeln!(h, "<figure>{}</figure>", inline_svg(svg));
        }
        if let Some(t) = &s.text {
            let _ = writeln!(h, "<pre>{}</pre>", e(t));
        }
    }
    let _ = writeln!(h, "<h2>Host</h2><table id=\"host\">");
    for (k, v) in &p.host {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", e(k), e(v));
    }
    let _ = writeln!(h, "</table>");
    if !p.interfaces.is_empty() {
        let _ = writeln!(
            h,
            "<h3>Interfaces</h3><pre>{}</pre>",
            e(&p.interfaces.join("\n"))
        );
    }
    if !p.checks.is_empty() {
        let _ = writeln!(
            h,
            "<h3>Settings (linerate doctor)</h3><table id=\"doctor\"><tr><th>status</th><th>setting</th><th>value</th></tr>"
        );
        for (status, name, value) in &p.checks {
            let class = if status == "warn" {
                " class=\"warn\""
            } else {
                ""
            };
            let _ = writeln!(
                h,
                "<tr{class}><td>{}</td><td>{}</td><td>{}</td></tr>",
                e(status),
                e(name),
                e(value)
            );
        }
        let _ = writeln!(h, "</table>");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_self_contained_and_escaped() {
        let p = Page {
            title: "tcp <test>".into(),
            command_line: "linerate tcp --json 'a&b'".into(),
            version: "linerate 0.1.0".into(),
            sections: vec![Section {
                heading: "Results".into(),
                text: Some("a < b".into()),
                svg: Some("<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\"></svg>".into()),
            }],
            host: vec![("kernel".into(), "Linux 6.1".into())],
            checks: vec![("warn".into(), "net.core.rmem_max".into(), "212992".into())],
            ..Page::default()
        };
        let html = page(&p);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>tcp &lt;test&gt;</title>"));
        assert!(html.contains("&#39;a&amp;b&#39;"));
        assert!(html.contains("<pre>a &lt; b</pre>"));
        assert!(html.contains("<svg class=\"plot\" role=\"img\" width=\"10\""));
        assert!(!html.contains("<?xml"));
        assert!(html.contains("<tr class=\"warn\">"));
        for external in ["<script", "src=", "href=", "@import", "url("] {
            assert!(!html.contains(external), "{external}");
        }
    }
}
