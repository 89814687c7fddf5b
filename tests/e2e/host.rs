//! Host insight (issue 11): `iface`, `doctor` and `--iface` against network
//! namespaces whose settings the tests choose (veth at MTU 9000, offloads
//! switched off with ethtool, per-namespace sysctls), so every reported
//! value is known in advance.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::helpers::*;
use crate::netns::{unavailable, NetPair, ADDR_A, ADDR_B};

/// Runs `sh -c script` inside namespace `ns`; its trimmed stdout.
fn sh_in(ns: &str, script: &str) -> Result<String, String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", script])
        .output()
        .map_err(|e| format!("ip netns exec: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Reads a sysctl in `ns` with whitespace normalised.
fn sysctl_in(ns: &str, name: &str) -> String {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    sh_in(ns, &format!("cat {path}"))
        .expect("read sysctl")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Switches GRO and TSO off on `dev` in `ns`, or says why not.
/// Whether `name` may be written in `ns`.
fn sysctl_writable_in(ns: &str, name: &str) -> bool {
    sh_in(ns, &format!("test -w /proc/sys/{}", name.replace('.', "/"))).is_ok()
}

fn offloads_off(ns: &str, dev: &str) -> Result<(), String> {
    if Command::new("ethtool")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        return Err("ethtool is not installed (.ci/run installs it)".into());
    }
    sh_in(ns, &format!("ethtool -K {dev} gro off tso off")).map(|_| ())
}

fn json_in(ns: &str, args: &[&str]) -> Value {
    let out = run_client_in(Some(ns), args, Duration::from_secs(30));
    assert_ok(&out, args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report}"))
}

#[test]
fn issue_11_iface_reports_the_namespace_settings() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("if", 9000).expect("namespaces");
    let ethtool = offloads_off(&pair.a, "va");
    if let Err(why) = &ethtool {
        skip_part("offload", why);
    }
    let doc = json_in(&pair.a, &["iface", "va", "--json"]);
    let i = &doc["interfaces"][0];
    assert_eq!(i["name"], "va");
    assert_eq!(i["mtu"], 9000);
    assert_eq!(i["state"], "up");
    assert_eq!(i["driver"], "veth");
    assert!(
        i["addresses"]
            .as_array()
            .expect("addresses")
            .iter()
            .any(|a| a == "198.18.0.1/30"),
        "{i}"
    );
    assert!(i["mac"].as_str().is_some_and(|m| m.len() == 17), "{i}");
    assert!(i["counters"]["tx_packets"].is_u64(), "{i}");
    if ethtool.is_ok() {
        assert_eq!(i["offloads"]["gro"], false, "{i}");
        assert_eq!(i["offloads"]["tso"], false, "{i}");
        assert_eq!(i["offloads"]["gso"], true, "{i}");
    }
    // Every interface of the namespace, and nothing from outside it.
    let all = json_in(&pair.a, &["iface", "--json"]);
    let names: Vec<&str> = all["interfaces"]
        .as_array()
        .expect("list")
        .iter()
        .map(|i| i["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["lo", "va"]);
    // An interface that is not there is a usage error that names the ones that are.
    let out = run_client_in(Some(&pair.a), &["iface", "eth0"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("have: lo, va"), "{}", stderr(&out));
}

#[test]
fn issue_11_doctor_reports_and_applies_namespace_sysctls() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("dr", 9000).expect("namespaces");
    let ns = &pair.a;
    sh_in(ns, "echo '4096 87380 1048576' > /proc/sys/net/ipv4/tcp_rmem && echo 128 > /proc/sys/net/core/somaxconn")
        .expect("set per-namespace sysctls");
    let ethtool = offloads_off(ns, "va");
    let host_tcp_rmem =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").expect("host tcp_rmem");

    let r = json_in(ns, &["doctor", "--for", "tcp", ADDR_B, "--json"]);
    assert_eq!(r["for"], "tcp");
    assert_eq!(r["interface"], "va");
    let rmem = check(&r, "net.ipv4.tcp_rmem");
    assert_eq!(rmem["value"], "4096 87380 1048576");
    assert_eq!(rmem["status"], "warn");
    // Run where doctor ran (issue 28).
    assert_eq!(
        rmem["fix"],
        format!("ip netns exec {ns} sysctl -w net.ipv4.tcp_rmem=\"4096 87380 33554432\"")
    );
    let mtu = check(&r, "route MTU");
    assert!(
        mtu["value"].as_str().expect("mtu").starts_with("9000 "),
        "{mtu}"
    );
    assert_eq!(mtu["status"], "ok");
    if ethtool.is_ok() {
        let gro = check(&r, "va offload gro");
        assert_eq!(
            (gro["value"].as_str(), gro["status"].as_str()),
            (Some("off"), Some("warn"))
        );
        assert_eq!(
            gro["fix"],
            format!("ip netns exec {ns} ethtool -K va gro on")
        );
    } else {
        skip_part("offload", format!("{ethtool:?}"));
    }
    // A sysctl that is visible here but read-only (rmem_max in a child
    // namespace on recent kernels) is never offered to --apply.
    let rmem_max = check(&r, "net.core.rmem_max");
    if rmem_max["status"] == "warn" && !sysctl_writable_in(ns, "net.core.rmem_max") {
        assert!(rmem_max.get("apply").is_none(), "{rmem_max}");
        assert!(
            rmem_max["why"]
                .as_str()
                .is_some_and(|w| w.contains("read-only")),
            "{rmem_max}"
        );
    }
    let lat = json_in(ns, &["doctor", "--for", "latency", "--json"]);
    let somax = check(&lat, "net.core.somaxconn");
    assert_eq!(
        (somax["value"].as_str(), somax["status"].as_str()),
        (Some("128"), Some("warn"))
    );

    // --apply changes the warned sysctls of this namespace only …
    let applied = json_in(ns, &["doctor", "--for", "latency", "--apply", "--json"]);
    assert!(
        applied["applied"]
            .as_array()
            .expect("applied")
            .iter()
            .any(|a| a["name"] == "net.core.somaxconn" && a["old"] == "128" && a["new"] == "4096"),
        "{}",
        applied["applied"]
    );
    assert_eq!(sysctl_in(ns, "net.core.somaxconn"), "4096");
    let applied = json_in(ns, &["doctor", "--for", "tcp", "--apply", "--json"]);
    assert_eq!(sysctl_in(ns, "net.ipv4.tcp_rmem"), "4096 87380 33554432");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").expect("host tcp_rmem"),
        host_tcp_rmem,
        "the host's own value must not change"
    );
    // … and the printed command restores them.
    let restore = applied["restore_command"]
        .as_str()
        .expect("restore command");
    assert!(
        restore.starts_with(&format!("ip netns exec {ns} sysctl -w ")),
        "{restore}"
    );
    if Command::new("sysctl").arg("-V").output().is_ok() {
        sh_in(ns, restore).expect("restore");
        assert_eq!(sysctl_in(ns, "net.ipv4.tcp_rmem"), "4096 87380 1048576");
    } else {
        skip_part("restore", "the sysctl command (procps) is not installed");
    }
}

#[test]
fn issue_11_iface_counters_agree_with_the_test_bytes() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("ic", 1500).expect("namespaces");
    let server = Server::start_in(Some(&pair.b), ADDR_B, &[]);
    let port = server.port_str();
    // A watcher in the client's namespace for the whole test.
    let watcher = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a,
            bin(),
            "iface",
            "va",
            "--watch",
            "100ms",
            "--count",
            "40",
            "--json-lines",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn watcher");
    std::thread::sleep(Duration::from_millis(300));
    let args = [
        "tcp", ADDR_B, "-p", &port, "-n", "20M", "--iface", "va", "--json",
    ];
    let out = run_client_in(Some(&pair.a), &args, Duration::from_secs(30));
    assert_ok(&out, &args);
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let payload = u(&report["sums"][0]["sender_bytes"]);
    assert_eq!(payload, 20 << 20);
    // Headers (Ethernet 14 + IPv4 20 + TCP 32 per ≤ 1448-byte segment, at
    // most), plus handshakes and the control connection.
    let max_wire = payload + payload.div_ceil(1448) * 66 + 256 * 1024;
    let iface = &report["iface"];
    let tx = u(&iface["traffic"]["tx_bytes"]);
    assert!(
        tx >= payload && tx <= max_wire,
        "--iface tx {tx} for payload {payload}"
    );
    assert_eq!(u(&iface["payload_sent_bytes"]), payload);
    assert!(f(&iface["overhead_percent"]) > 0.0, "{iface}");
    assert!(
        report["intervals"][0]["iface"]["tx_bytes"].is_u64(),
        "{}",
        report["intervals"][0]
    );

    let watched = watcher.wait_with_output().expect("watcher");
    assert!(
        watched.status.success(),
        "{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    let text = String::from_utf8_lossy(&watched.stdout);
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(records.len(), 40);
    let watched_tx: u64 = records.iter().map(|r| u(&r["tx_bytes"])).sum();
    assert!(
        watched_tx >= payload && watched_tx <= max_wire,
        "iface --watch saw {watched_tx} bytes sent for {payload} bytes of payload"
    );
}

#[test]
fn issue_11_iface_watch_prints_plain_lines_off_a_terminal() {
    let out = run_client(
        &["iface", "lo", "--watch", "50ms", "--count", "3"],
        Duration::from_secs(10),
    );
    assert_ok(&out, &["iface"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "a header and one line per interval: {text}");
    assert!(
        lines[0].contains("rx bit/s") && lines[0].contains("tx drop"),
        "{text}"
    );
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.contains(" lo ") && !l.contains('\x1b')),
        "{text}"
    );
    let out = run_client(
        &["iface", "lo", "--watch", "--json"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--json-lines"), "{}", stderr(&out));
}

#[test]
fn issue_11_iface_on_a_loopback_test_in_human_output() {
    let out = run_client(
        &["tcp", "-t", "1", "--iface", "lo"],
        Duration::from_secs(30),
    );
    assert_ok(&out, &["tcp --iface lo"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  iface lo "), "{text}");
    assert!(text.contains("Interface lo over the test:"), "{text}");
    assert!(
        text.contains("on loopback every packet is counted"),
        "{text}"
    );
    let _ = ADDR_A;
}

fn ping_json(ns: Option<&str>, args: &[&str]) -> (std::process::Output, Value) {
    let out = run_client_in(ns, args, Duration::from_secs(30));
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    (out, v)
}

fn assert_all_answered(r: &Value, n: u64) {
    assert_eq!(
        (u(&r["sent"]), u(&r["received"]), u(&r["duplicates"])),
        (n, n, 0),
        "{r}"
    );
    assert_eq!(f(&r["loss_percent"]), 0.0);
    let rtt = &r["rtt"];
    assert_eq!(u(&rtt["count"]), n);
    assert!(
        u(&rtt["min_ns"]) > 0
            && u(&rtt["min_ns"]) <= u(&rtt["p50_ns"])
            && u(&rtt["p50_ns"]) <= u(&rtt["max_ns"]),
        "{rtt}"
    );
    for rep in r["replies"].as_array().expect("replies") {
        assert_eq!(rep["ttl"], 64, "{rep}");
        assert_eq!(u(&rep["bytes"]), 8 + u(&r["size"]));
    }
}

#[test]
fn issue_11_ping_loopback() {
    let args = [
        "ping",
        "127.0.0.1",
        "-c",
        "3",
        "-i",
        "50ms",
        "-s",
        "100",
        "--json",
    ];
    let (out, r) = ping_json(None, &args);
    if !out.status.success() && stderr(&out).contains("not allowed") {
        return skip(stderr(&out));
    }
    assert_ok(&out, &args);
    assert_all_answered(&r, 3);
    // Human output: a line per reply with its TTL, then the statistics.
    let out = run_client(
        &["ping", "127.0.0.1", "-c", "2", "-i", "50ms"],
        Duration::from_secs(10),
    );
    assert_ok(&out, &["ping"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("64 bytes from 127.0.0.1: icmp_seq=").count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("ttl=64") && text.contains("0.0% loss") && text.contains("p99.9"),
        "{text}"
    );
}

#[test]
fn issue_11_ping_namespace_host_raw_and_datagram_sockets() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("pg", 1500).expect("namespaces");
    let args = ["ping", ADDR_B, "-c", "4", "-i", "20ms", "--raw", "--json"];
    let (out, r) = ping_json(Some(&pair.a), &args);
    assert_ok(&out, &args);
    assert_eq!(r["method"], "raw");
    assert_all_answered(&r, 4);
    // Unprivileged ICMP sockets, once this namespace's ping_group_range
    // admits every group.
    sh_in(
        &pair.a,
        "echo '0 2147483647' > /proc/sys/net/ipv4/ping_group_range",
    )
    .expect("ping_group_range");
    let args = ["ping", ADDR_B, "-c", "4", "-i", "20ms", "--json"];
    let (out, r) = ping_json(Some(&pair.a), &args);
    assert_ok(&out, &args);
    assert_eq!(r["method"], "icmp_datagram");
    assert_all_answered(&r, 4);
    let _ = ADDR_A;
}

#[test]
fn issue_11_ping_an_address_nobody_owns_is_100_percent_loss() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("pl", 1500).expect("namespaces");
    // Routed to the peer namespace, which does not forward and owns no such
    // address: the requests leave and nothing ever answers.
    sh_in(&pair.a, &format!("ip route add 198.19.0.0/24 via {ADDR_B}")).expect("route");
    let args = [
        "ping",
        "198.19.0.9",
        "-c",
        "3",
        "-i",
        "50ms",
        "-W",
        "300ms",
        "--json",
    ];
    let (out, r) = ping_json(Some(&pair.a), &args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("100% loss"), "{}", stderr(&out));
    assert_eq!((u(&r["sent"]), u(&r["received"])), (3, 0), "{r}");
    assert_eq!(f(&r["loss_percent"]), 100.0);
    assert!(r["rtt"].is_null(), "{r}");
    let transmitted = NetPair::counter(&pair.a, "va", "tx_packets");
    assert!(
        transmitted >= 3,
        "the requests left the namespace ({transmitted} packets)"
    );
}

#[test]
fn issue_11_iface_watch_redraws_in_place_on_a_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        return skip("tmux is not installed");
    }
    // Redrawn in place: the title line names the interval number, and the
    // screen holds one header, not one per interval.
    let screen = crate::repeat::on_terminal(
        &format!("{} iface lo --watch 100ms --count 100", bin()),
        &[
            "linerate iface --watch: every 100ms, interval 1",
            "of 100 (Ctrl-C to stop)",
            "rx bit/s",
            "lo ",
        ],
    );
    assert_eq!(screen.matches("rx bit/s").count(), 1, "{screen}");
    assert!(
        !screen.contains('\x1b'),
        "escape codes are interpreted, not shown"
    );
}

#[test]
fn issue_28_iface_escapes_interface_names() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("esc", 1500).expect("namespaces");
    // The kernel takes ESC and BEL in a name (only '/', ':' and white
    // space are refused): a name that would recolour and ring a terminal.
    let hostile = "ev\x1b[31m\x07";
    let made = std::process::Command::new("ip")
        .args([
            "-n", &pair.a, "link", "add", hostile, "type", "veth", "peer", "name", "evp",
        ])
        .status()
        .expect("ip");
    if !made.success() {
        return skip("this kernel refused the interface name");
    }
    for args in [&["iface"][..], &["iface", "--watch", "50ms", "-c", "1"]] {
        let out = run_client_in(Some(&pair.a), args, Duration::from_secs(10));
        assert_ok(&out, args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains('\x1b') && !text.contains('\x07'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("ev\\u{1b}[31m\\u{7}"), "{args:?}: {text}");
    }
    let out = run_client_in(Some(&pair.a), &["iface", "nosuch"], Duration::from_secs(10));
    assert!(!stderr(&out).contains('\x1b'), "{}", stderr(&out));
}

/// `doctor` advice fits the path (issue 28): on a path limited to 1400
/// bytes by its route, no jumbo frames are suggested; on a plain 1500
/// Ethernet path they are, saying what must match; `--apply`'s restore
/// command and every network check's fix run in the namespace doctor ran in.
#[test]
fn issue_28_doctor_mtu_advice_fits_the_path_and_restore_names_the_namespace() {
    if let Some(why) = unavailable() {
        return skip(why);
    }
    let pair = NetPair::new("dm", 1500).expect("namespaces");
    let ns = &pair.a;
    let plain = json_in(ns, &["doctor", "--for", "tcp", ADDR_B, "--json"]);
    let mtu = check(&plain, "route MTU");
    assert_eq!(mtu["status"], "warn", "{mtu}");
    let fix = mtu["fix"].as_str().expect("fix");
    assert!(
        fix.contains("every hop") && fix.contains(ADDR_B) && fix.contains("mtu 9000"),
        "{fix}"
    );
    // Every network check's fix runs in the namespace doctor ran in.
    let prefix = format!("ip netns exec {ns} ");
    assert!(
        fix.contains(&format!("{prefix}ip link set dev va mtu 9000")),
        "{fix}"
    );
    for name in [
        "net.ipv4.tcp_congestion_control",
        "va offload gro",
        "va NUMA node",
    ] {
        let fix = check(&plain, name)["fix"].as_str().unwrap_or("").to_owned();
        assert!(fix.starts_with(&prefix), "{name}: {fix}");
    }
    // The route to B now carries 1400-byte packets only.
    sh_in(ns, &format!("ip route add {ADDR_B}/32 dev va mtu 1400")).expect("route");
    let limited = json_in(ns, &["doctor", "--for", "tcp", ADDR_B, "--json"]);
    let mtu = check(&limited, "route MTU");
    assert!(
        mtu["value"].as_str().expect("mtu").starts_with("1400 "),
        "{mtu}"
    );
    assert_eq!(mtu["status"], "ok", "{mtu}");
    assert!(mtu.get("fix").is_none(), "no jumbo advice: {mtu}");
    assert!(
        mtu["why"]
            .as_str()
            .is_some_and(|w| w.contains("no jumbo frames")),
        "{mtu}"
    );
    sh_in(ns, "echo 128 > /proc/sys/net/core/somaxconn").expect("somaxconn");
    let applied = json_in(ns, &["doctor", "--for", "latency", "--apply", "--json"]);
    let restore = applied["restore_command"].as_str().expect("restore");
    assert_eq!(
        restore,
        format!("ip netns exec {ns} sysctl -w net.core.somaxconn=128"),
        "{applied}"
    );
}
