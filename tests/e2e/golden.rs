//! The JSON schema, pinned: a real report of every test kind, made by the
//! real binary on loopback, checked field by field against the field
//! reference in docs/json.md — every emitted field is documented with the
//! right type, and every field documented as present is there. A change to
//! the schema has to change the documentation (and so is seen in review).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::helpers::*;

/// When a documented field must be present (given its parent is).
#[derive(Debug, Clone)]
enum When {
    All,
    Optional,
    /// In reports of these kinds (`tcp`, `udp`, `rr`, `crr`).
    Kinds(Vec<String>),
}

#[derive(Debug, Clone)]
struct Field {
    types: Vec<String>,
    when: When,
}

fn when_of(col: &str) -> When {
    match col {
        "all" => When::All,
        "-" => When::Optional,
        kinds => When::Kinds(kinds.split(',').map(String::from).collect()),
    }
}

/// One ```` ```fields NAME ```` block of docs/json.md, aliases expanded.
fn schema(name: &str) -> BTreeMap<String, Field> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md"))
        .expect("read docs/json.md");
    let open = format!("```fields {name}");
    let start = doc
        .find(&open)
        .unwrap_or_else(|| panic!("docs/json.md has no `{open}` block"));
    let body = &doc[start + open.len()..];
    let body = &body[..body.find("```").expect("unterminated fields block")];
    // The document itself: an object.
    let mut fields = BTreeMap::from([(
        String::new(),
        Field {
            types: vec!["obj".into()],
            when: When::All,
        },
    )]);
    let mut aliases = Vec::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.get(1) == Some(&"=") {
            let own_when = cols.get(3).map(|w| when_of(w));
            aliases.push((cols[0].to_string(), cols[2].to_string(), own_when));
            continue;
        }
        assert_eq!(cols.len(), 3, "docs/json.md field row {line:?}");
        let when = when_of(cols[2]);
        let types = cols[1].split('|').map(String::from).collect();
        let dup = fields.insert(cols[0].to_string(), Field { types, when });
        assert!(dup.is_none(), "{} listed twice", cols[0]);
    }
    // `A = B`: A has B's row and B's sub-fields. Aliases may name aliases,
    // so expand until nothing changes.
    loop {
        let before = fields.len();
        for (alias, target, own_when) in &aliases {
            let copies: Vec<(String, Field)> = fields
                .iter()
                .filter_map(|(k, f)| {
                    let rest = k.strip_prefix(target.as_str())?;
                    let mut f = f.clone();
                    if let (true, Some(w)) = (rest.is_empty(), own_when) {
                        f.when = w.clone();
                    }
                    (rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
                        .then(|| (format!("{alias}{rest}"), f))
                })
                .collect();
            for (k, f) in copies {
                fields.entry(k).or_insert(f);
            }
        }
        if fields.len() == before {
            break;
        }
    }
    for (alias, _, _) in &aliases {
        assert!(fields.contains_key(alias), "alias {alias} names nothing");
    }
    fields
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "num",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "arr",
        Value::Object(_) => "obj",
    }
}

fn type_ok(want: &[String], v: &Value) -> bool {
    let got = type_of(v);
    want.iter()
        .any(|w| w == got || (w == "num" && got == "int"))
}

fn required(f: &Field, kind: &str) -> bool {
    match &f.when {
        When::All => true,
        When::Optional => false,
        When::Kinds(k) => k.iter().any(|x| x == kind),
    }
}

/// Checks `v` (at `path`) against `schema`, collecting problems and the
/// documented paths seen.
fn check(
    schema: &BTreeMap<String, Field>,
    kind: &str,
    path: &str,
    v: &Value,
    seen: &mut BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let Some(field) = schema.get(path) else {
        problems.push(format!("{path}: emitted but not in docs/json.md ({v})"));
        return;
    };
    seen.insert(path.to_string());
    if !type_ok(&field.types, v) {
        problems.push(format!(
            "{path}: documented as {}, emitted {} ({v})",
            field.types.join("|"),
            type_of(v)
        ));
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                check(schema, kind, &child, x, seen, problems);
            }
            let prefix = if path.is_empty() {
                String::new()
            } else {
                format!("{path}.")
            };
            for (k, f) in schema {
                let Some(name) = k.strip_prefix(prefix.as_str()) else {
                    continue;
                };
                let direct = !name.is_empty() && !name.contains('.') && !name.contains('[');
                if direct && required(f, kind) && !map.contains_key(name) {
                    problems.push(format!(
                        "{k}: documented as present in {kind} reports, missing"
                    ));
                }
            }
        }
        Value::Array(items) => {
            let elem = format!("{path}[]");
            if let Some(f) = schema.get(&elem) {
                if items.is_empty() && matches!(f.when, When::Kinds(_)) && required(f, kind) {
                    problems.push(format!("{path}: documented as non-empty in {kind} reports"));
                }
            }
            for x in items {
                check(schema, kind, &elem, x, seen, problems);
            }
        }
        _ => {}
    }
}

fn assert_matches_docs(
    schema: &BTreeMap<String, Field>,
    kind: &str,
    root: &str,
    v: &Value,
    seen: &mut BTreeSet<String>,
    what: &str,
) {
    let mut problems = Vec::new();
    check(schema, kind, root, v, seen, &mut problems);
    assert!(
        problems.is_empty(),
        "{what}: the report and docs/json.md disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// The runs whose `--json` reports the golden test checks: the schema's
/// test kind, then the command line after `HOST -p PORT --json`, its first
/// word the subcommand.
fn golden_runs() -> [(&'static str, &'static [&'static str]); 15] {
    [
        ("tcp", &["tcp", "-t", "0.4", "-i", "0.2", "--iface", "lo"]),
        ("tcp", &["tcp", "-n", "20M", "-i", "0.2"]),
        ("tcp", &["tcp", "-t", "0.4", "-i", "0.2", "-R"]),
        (
            "tcp",
            &["tcp", "-t", "0.4", "-i", "0.2", "--bidir", "-P", "2"],
        ),
        // Event-loop flows: fairness in the sums, flow_interval records.
        (
            "tcp",
            &[
                "tcp",
                "-t",
                "0.4",
                "-i",
                "0.2",
                "--flows",
                "3",
                "--threads",
                "2",
            ],
        ),
        ("udp", &["udp", "-t", "0.4", "-i", "0.2", "-P", "2"]),
        (
            "udp",
            &[
                "udp", "-R", "-k", "400", "--pps", "2000", "-i", "0.1", "--verify",
            ],
        ),
        // The batch engine on the client's side: sending, then receiving.
        (
            "udp",
            &[
                "udp", "-t", "0.3", "-b", "0", "-l", "1472", "--engine", "batch",
            ],
        ),
        (
            "udp",
            &["udp", "-t", "0.3", "-R", "-l", "1472", "--engine", "batch"],
        ),
        ("rr", &["rr", "-n", "200", "--sizes", "1,64"]),
        (
            "rr",
            &["rr", "-n", "200", "--sizes", "1,64", "--proto", "udp"],
        ),
        (
            "rr",
            &[
                "rr",
                "-t",
                "0.2",
                "--sizes",
                "32",
                "--batch",
                "8",
                "--under-load",
                "1",
            ],
        ),
        ("crr", &["crr", "-n", "50"]),
        // What an accelerated engine used: rr per side, sendfile/splice.
        (
            "rr",
            &[
                "rr",
                "-n",
                "100",
                "--sizes",
                "64",
                "--engine",
                "zerocopy",
                "--server-engine",
                "zerocopy",
            ],
        ),
        (
            "tcp",
            &[
                "tcp",
                "-n",
                "8M",
                "--engine",
                "zerocopy:sendfile",
                "--server-engine",
                "zerocopy:sendfile",
            ],
        ),
    ]
}

/// Runs the client with `args` (`--json-lines`) and checks each record
/// against the schema: start = `test`, interval = `intervals[]`, summary =
/// the report; the first record is the start and the last the summary.
fn check_json_lines(
    schema: &BTreeMap<String, Field>,
    kind: &str,
    args: &[&str],
    seen: &mut BTreeSet<String>,
) {
    let out = run_client(args, std::time::Duration::from_secs(60));
    assert_ok(&out, args);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut types = Vec::new();
    for line in text.lines() {
        let mut rec: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {line}"));
        let ty = rec["type"].as_str().expect("record type").to_string();
        rec.as_object_mut().expect("record").remove("type");
        let root = match ty.as_str() {
            "start" => "test",
            "interval" => "intervals[]",
            "flow_interval" => "flow_interval",
            "rr_phase" => "rr_phase",
            "summary" => "",
            other => panic!("{args:?}: unknown record type {other}"),
        };
        assert_matches_docs(schema, kind, root, &rec, seen, &format!("{args:?} {ty}"));
        types.push(ty);
    }
    assert_eq!(types.first().map(String::as_str), Some("start"), "{args:?}");
    assert_eq!(
        types.last().map(String::as_str),
        Some("summary"),
        "{args:?}"
    );
}

/// A real report of every kind of test (short runs on loopback) matches
/// the documented schema field by field, and so does every `--json-lines`
/// record.
#[test]
fn golden_json_reports_match_docs_json_md() {
    let schema = schema("report");
    let server = Server::start(&[]);
    let port = server.port_str();
    let mut seen = BTreeSet::new();
    for (kind, extra) in golden_runs() {
        let mut args = vec![extra[0], "127.0.0.1", "-p", &port, "--json"];
        args.extend_from_slice(&extra[1..]);
        let report = json_client(&args);
        assert_matches_docs(&schema, kind, "", &report, &mut seen, &format!("{args:?}"));
    }
    for (kind, extra) in [("tcp", "tcp"), ("udp", "udp"), ("rr", "rr")] {
        let mut args = vec![extra, "127.0.0.1", "-p", &port, "--json-lines"];
        args.extend_from_slice(match kind {
            "rr" => &["-n", "100", "--sizes", "1"],
            _ => &["-t", "0.3", "-i", "0.1"],
        });
        check_json_lines(&schema, kind, &args, &mut seen);
    }

    let never: Vec<&String> = schema.keys().filter(|k| !seen.contains(*k)).collect();
    println!("documented fields these runs did not produce (optional, or other modes): {never:?}");
}

/// A sweep's report (grid and zero-loss search) matches its documented
/// schema, in `--json` and in each `--json-lines` record.
#[test]
fn golden_json_sweep_matches_docs_json_md() {
    let schema = schema("sweep");
    let server = Server::start(&[]);
    let port = server.port_str();
    let base = [
        "sweep",
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "100",
        "--pps",
        "1000,2000",
        "-t",
        "0.2",
        "--find-zero-loss",
    ];
    let mut seen = BTreeSet::new();
    let mut args = base.to_vec();
    args.push("--json");
    let report = json_client(&args);
    assert!(
        report.get("zero_loss").is_some(),
        "no zero_loss in {report}"
    );
    assert_matches_docs(&schema, "udp", "", &report, &mut seen, "sweep --json");

    let mut args = base.to_vec();
    args.push("--json-lines");
    let out = run_client(&args, std::time::Duration::from_secs(60));
    assert_ok(&out, &args);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut rec: Value = serde_json::from_str(line).expect("JSON line");
        let ty = rec["type"].as_str().expect("record type").to_string();
        rec.as_object_mut().expect("record").remove("type");
        let root = match ty.as_str() {
            "start" => "test",
            "trial" => "trials[]",
            "summary" => "",
            other => panic!("unknown sweep record type {other}"),
        };
        assert_matches_docs(
            &schema,
            "udp",
            root,
            &rec,
            &mut seen,
            &format!("sweep {ty}"),
        );
    }
}

/// The checker itself can fail: an undocumented field, a wrong type and a
/// missing field are each reported.
#[test]
fn golden_checker_reports_drift() {
    let schema = schema("report");
    let cpu = serde_json::json!({
        "scope": "process", "user_s": "0.1", "system_s": 0.2, "wall_s": 1,
        "percent_of_cpu": 30.0, "bogus": 1,
        "busiest_thread": "stream 1 sender", "busiest_thread_percent": 25.0
    });
    let mut problems = Vec::new();
    check(
        &schema,
        "tcp",
        "cpu.client",
        &cpu,
        &mut BTreeSet::new(),
        &mut problems,
    );
    let text = problems.join("\n");
    assert!(
        text.contains("cpu.client.bogus: emitted but not in docs"),
        "{text}"
    );
    assert!(
        text.contains("cpu.client.user_s: documented as num"),
        "{text}"
    );
    assert_eq!(problems.len(), 2, "{text}");
    let mut problems = Vec::new();
    let empty = serde_json::json!({"scope": "process"});
    check(
        &schema,
        "tcp",
        "cpu.client",
        &empty,
        &mut BTreeSet::new(),
        &mut problems,
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("cpu.client.wall_s: documented as present")),
        "{problems:?}"
    );
}
