//! Tests of the two-stage CLI: flags as typed → validated config.

use super::common::DEFAULT_PORT;
use super::engine::sqpoll_note;
use std::path::PathBuf;

use super::values::{cpu_list, parse_cpus};
use super::*;
use linerate_engine::engines::batch::Toggle;
use linerate_engine::engines::Batch;
use linerate_engine::engines::{auto, EngineKind};
use linerate_proto::spec::{Direction, Limit, Pace, Protocol, RrLimit, TestKind, DEFAULT_RR_SIZES};
use linerate_report::render::Format;
use linerate_run::config::{RrConfig, AUTO};

fn parse(args: &str) -> Result<Command, clap::Error> {
    parse_from(
        std::iter::once("linerate".to_string()).chain(args.split_whitespace().map(String::from)),
    )
}

fn tcp(args: &str) -> ClientConfig {
    match parse(args).expect("parses") {
        Command::Tcp(c) => c,
        other => panic!("not tcp: {other:?}"),
    }
}

#[test]
fn tcp_defaults() {
    let c = tcp("tcp");
    assert_eq!(c.target, Target::Embedded);
    assert_eq!(c.spec.limit, Limit::TimeMs(10_000));
    assert_eq!(c.spec.direction, Direction::Forward);
    assert_eq!(c.spec.streams, 1);
    assert_eq!(c.format, Format::Human);
}

#[test]
fn issue_7_engine_is_resolved_once_into_a_typed_choice() {
    assert_eq!(tcp("tcp").engine, EngineKind::Syscall);
    assert_eq!(tcp("tcp --engine syscall").engine, EngineKind::Syscall);
    for args in [
        "tcp --engine warp",
        "udp --engine warp",
        "server --engine warp",
    ] {
        let e = parse(args).expect_err("unknown engine").to_string();
        assert!(
            e.contains("unknown engine \"warp\"; this build has: syscall"),
            "{args}: {e}"
        );
    }
    match parse("server --engine syscall").expect("parses") {
        Command::Server(s) => assert_eq!(s.engine, auto::Configured::Fixed(EngineKind::Syscall)),
        other => panic!("not a server: {other:?}"),
    }
}

#[test]
fn issue_8_auto_is_every_sides_default() {
    match parse("server").expect("parses") {
        Command::Server(s) => assert_eq!(s.engine, auto::Configured::Auto),
        other => panic!("not a server: {other:?}"),
    }
    let c = tcp("tcp");
    assert!(
        c.engine_note
            .as_deref()
            .is_some_and(|n| n.starts_with(auto::NOTE_PREFIX)),
        "{:?}",
        c.engine_note
    );
    let e = parse("server --gso")
        .expect_err("batch option with auto")
        .to_string();
    assert!(e.contains("--gso needs --engine batch"), "{e}");
}

#[test]
fn issue_8_sqpoll_on_a_small_host_says_why_its_figures_are_low() {
    let spec = tcp("tcp -P 2").spec;
    let sq = EngineKind::Uring { sqpoll: true };
    // 2 streams × (thread + kernel poller) × both sides on loopback = 8.
    let note = sqpoll_note(sq, &spec, None, 2).expect("a note on 2 CPUs");
    assert!(
        note.contains("8 threads want a CPU") && note.contains("may use 2"),
        "{note}"
    );
    assert!(sqpoll_note(sq, &spec, Some("127.0.0.1"), 8).is_none());
    // A remote server: only this side's 4.
    assert!(sqpoll_note(sq, &spec, Some("198.18.0.2"), 4).is_none());
    assert!(sqpoll_note(sq, &spec, Some("198.18.0.2"), 3).is_some());
    assert!(sqpoll_note(EngineKind::Uring { sqpoll: false }, &spec, None, 1).is_none());
}

#[test]
fn tcp_flags() {
    let c = tcp("tcp 198.18.0.1 -p 6000 -t 3s -l 64K -P 4 -R -w 4M --omit 1 -i 500ms -C cubic -N -M 1400 --json");
    assert_eq!(
        c.target,
        Target::Remote {
            host: "198.18.0.1".into(),
            port: 6000
        }
    );
    assert_eq!(c.spec.limit, Limit::TimeMs(3000));
    assert_eq!(c.spec.len, 65536);
    assert_eq!(c.spec.streams, 4);
    assert_eq!(c.spec.direction, Direction::Reverse);
    assert_eq!(c.spec.tcp.window, Some(4 << 20));
    assert_eq!(c.spec.omit_ms, 1000);
    assert_eq!(c.spec.interval_ms, 500);
    assert_eq!(c.spec.tcp.congestion.as_deref(), Some("cubic"));
    assert!(c.spec.tcp.no_delay);
    assert_eq!(c.spec.tcp.mss, Some(1400));
    assert_eq!(c.format, Format::Json);
    assert_eq!(tcp("tcp -n 10M").spec.limit, Limit::Bytes(10 << 20));
}

#[test]
fn invalid_combinations_name_the_flag() {
    for (args, needle) in [
        ("tcp --reverse --bidir", "--bidir"),
        ("tcp -t 5 -n 1M", "--bytes"),
        ("tcp -P 0", "--parallel"),
        ("tcp -l 0", "--len"),
        ("tcp -t 0", "--time"),
        ("tcp -i 1ms", "--interval"),
        ("tcp --json --csv", "--csv"),
        ("tcp --cpus 9999", "--cpus"),
        ("tcp --engine warp", "engine"),
        (
            "tcp 198.18.0.1 --iperf3 --skip-rx-copy",
            "--skip-rx-copy is not available with --iperf3",
        ),
        (
            "udp 198.18.0.1 --iperf3 --busy-poll",
            "--busy-poll is not available with --iperf3",
        ),
        ("udp 198.18.0.1 --no-gso", "--no-gso needs --engine batch"),
        ("tcp -l 12Q", "--len"),
        ("server --max-concurrent 0", "--max-concurrent"),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

#[test]
fn issue_8_batch_engine_options_resolve_once() {
    let c = udp("udp 198.18.0.1 --engine batch");
    assert_eq!(c.engine, EngineKind::Batch(Batch::AUTO));
    let c = udp("udp 198.18.0.1 --engine batch --no-gso --no-gro");
    assert_eq!(
        c.engine,
        EngineKind::Batch(Batch {
            gso: Toggle::Off,
            gro: Toggle::Off,
        })
    );
    // The last of a pair wins; a kernel without UDP_SEGMENT refuses it.
    let r = parse("udp 198.18.0.1 --engine batch --no-gso --gso");
    match &linerate_engine::caps::caps().udp_segment {
        Ok(()) => assert!(matches!(
            r.expect("gso on"),
            Command::Udp(c) if matches!(c.engine, EngineKind::Batch(b) if b.gso == Toggle::On)
        )),
        Err(_) => assert!(r.expect_err("refused").to_string().contains("--gso")),
    }
    assert_eq!(tcp("tcp").engine, EngineKind::Syscall);
}

#[test]
fn issue_8_skip_rx_copy_and_busy_poll_are_test_options_for_every_engine() {
    for engine in ["syscall", "batch", "zerocopy"] {
        let c = tcp(&format!("tcp --engine {engine} --skip-rx-copy --busy-poll"));
        assert!(c.spec.tcp.skip_rx_copy && c.spec.busy_poll, "{engine}");
    }
    let c = tcp("tcp -R");
    assert!(!c.spec.tcp.skip_rx_copy && !c.spec.busy_poll);
    assert!(udp("udp 198.18.0.1 -b 0 --busy-poll").spec.busy_poll);
}

#[test]
fn issue_8_tcp_defaults_are_1m_writes_and_receivers_that_copy() {
    // Chosen by CPU per GiB of both sides (docs/design/numbers.md, "Defaults
    // and why"): a change of default needs new evidence there.
    let c = tcp("tcp");
    assert_eq!(c.spec.len, 1 << 20);
    assert!(!c.spec.tcp.skip_rx_copy && !c.spec.busy_poll);
}

#[test]
fn netperf_names_map_to_tests() {
    let s = tcp("TCP_STREAM -H 198.18.0.2 -l 5");
    assert_eq!(s.spec.direction, Direction::Forward);
    assert_eq!(s.spec.limit, Limit::TimeMs(5000));
    assert_eq!(
        s.target,
        Target::Remote {
            host: "198.18.0.2".into(),
            port: DEFAULT_PORT
        }
    );
    let m = tcp("TCP_MAERTS 198.18.0.2");
    assert_eq!(m.spec.direction, Direction::Reverse);
    let t = tcp("-t TCP_MAERTS -H 198.18.0.2 -l -1000000");
    assert_eq!(t.spec.direction, Direction::Reverse);
    assert_eq!(t.spec.limit, Limit::Bytes(1_000_000));
}

#[test]
fn issue_13_netperf_habits_work() {
    // Test-specific -m/-s/-S/-D after `--`, netperf's own `-H h -t T` order,
    // lower-case names.
    let s = tcp("-H 198.18.0.2 -t tcp_stream -l 3 -- -m 64K -s 1M -S 1M -D");
    assert_eq!(s.spec.len, 64 << 10);
    assert_eq!(s.spec.tcp.window, Some(1 << 20));
    assert!(s.spec.tcp.no_delay);
    assert_eq!(s.spec.limit, Limit::TimeMs(3000));
    // Global -p, -c/-C (always measured) and -D (interim results).
    let s = tcp("TCP_STREAM -H 198.18.0.2 -p 6000 -c -C -D 2");
    assert_eq!(s.spec.interval_ms, 2000);
    assert_eq!(
        s.target,
        Target::Remote {
            host: "198.18.0.2".into(),
            port: 6000
        }
    );
    // netperf's UDP_STREAM is unpaced unless a rate is asked for.
    let u = udp("UDP_STREAM -H 198.18.0.2 -- -m 1472");
    let spec = u.spec.udp.expect("udp");
    assert_eq!(spec.pace, linerate_proto::spec::Pace::Unlimited);
    assert_eq!(u.spec.len, 1472);
    let u = udp("UDP_STREAM -H 198.18.0.2 -b 10M");
    assert_ne!(
        u.spec.udp.expect("udp").pace,
        linerate_proto::spec::Pace::Unlimited
    );
    // -m is the request size of the request/response tests.
    let r = rr("-H 198.18.0.2 -t TCP_RR -- -m 64")
        .client
        .spec
        .rr
        .expect("rr");
    assert_eq!(r.sizes, vec![64]);
}

#[test]
fn issue_13_netperf_options_linerate_cannot_honour_are_named() {
    for (args, named) in [
        ("TCP_STREAM -H h -- -M 64K", "-M"),
        ("TCP_STREAM -H h -I 99,5", "-I"),
        ("TCP_STREAM -H h -- -s 1M -S 2M", "-s/-S"),
        ("TCP_STREAM -H h -- -Q 1", "-Q"),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(named), "{args}: {e}");
    }
}

#[test]
fn issue_13_what_no_server_could_run_is_refused_locally() {
    let e = parse("rr --proto udp -s 70000")
        .expect_err("too large")
        .to_string();
    assert!(e.contains("--sizes") && e.contains("65507"), "{e}");
    let e = parse("rr --proto udp -s 64 -r 70000")
        .expect_err("too large")
        .to_string();
    assert!(e.contains("--response-size"), "{e}");
    // A server's own limits (raised with server flags) are its to apply.
    assert!(parse("tcp -t 100000 -P 1000").is_ok());
}

#[test]
fn issue_13_len_too_large_names_the_maximum() {
    let e = parse("tcp --len 10G").expect_err("too large").to_string();
    assert!(e.contains("at most 4294967295 bytes"), "{e}");
    assert!(!e.contains("integral type"), "{e}");
}

fn udp(args: &str) -> ClientConfig {
    match parse(args).expect("parses") {
        Command::Udp(c) => c,
        other => panic!("not udp: {other:?}"),
    }
}

#[test]
fn udp_flags() {
    let c = udp("udp 198.18.0.2 --len 8972 --rate 9.5G --burst 8 -P 2 --bidir -w 8M --priority -20 --verify -k 1000");
    let u = c.spec.udp.as_ref().expect("udp spec");
    assert_eq!(c.spec.protocol, Protocol::Udp);
    assert_eq!(c.spec.len, 8972);
    assert_eq!(u.pace, Pace::Rate(9_500_000_000));
    assert_eq!(u.burst, 8);
    assert_eq!(u.window, Some(8 << 20));
    assert_eq!(u.priority, Some(-20));
    assert!(u.verify);
    assert_eq!(c.spec.limit, Limit::Datagrams(1000));
    assert_eq!(c.spec.direction, Direction::Bidir);
    let pace = |a: &str| udp(a).spec.udp.expect("udp").pace;
    assert_eq!(pace("udp --pps 0.05"), Pace::MilliPps(50));
    assert_eq!(pace("udp --pps 2M"), Pace::MilliPps(2_000_000_000));
    assert_eq!(pace("udp -b 0"), Pace::Unlimited);
    assert_eq!(pace("udp"), Pace::Rate(1_000_000));
    assert_eq!(udp("udp -l 12K").spec.len, 12288);
    let n = udp("UDP_STREAM -H 198.18.0.2 -l 5 --pps 1k");
    assert_eq!(n.spec.protocol, Protocol::Udp);
    assert_eq!(n.spec.limit, Limit::TimeMs(5000));
    assert_eq!(
        udp("udp --inject-faults skip:3,dup:5")
            .spec
            .udp
            .expect("udp")
            .faults
            .len(),
        2
    );
    for (args, needle) in [
        ("udp -l 27", "--len"),
        ("udp -l 65508", "--len"),
        ("udp --pps 0", "--pps"),
        ("udp --pps 1 --rate 1M", "--pps"),
        ("udp --burst 0", "--burst"),
        ("udp -k 0", "--count"),
        ("udp --priority -21", "--priority"),
        ("udp --inject-faults swap:1,skip:2", "--inject-faults"),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

#[test]
fn sweep_flags() {
    let Command::Sweep(s) = parse(
        "sweep udp 198.18.0.2 --sizes 1472,4000,8972 --pps 50k:1M:50k --find-zero-loss --plot /tmp/x.svg --json",
    )
    .expect("parses") else {
        panic!("not a sweep")
    };
    assert_eq!(s.sizes, vec![1472, 4000, 8972]);
    assert_eq!(s.points.len(), 20);
    assert_eq!(s.points[0], 50_000.0);
    assert_eq!(s.points[19], 1_000_000.0);
    assert!(!s.rates_are_bits && s.find_zero_loss);
    assert_eq!(s.base.format, Format::Json);
    let Command::Sweep(s) = parse("sweep udp --rates 100M,1G -t 1").expect("parses") else {
        panic!("not a sweep")
    };
    assert_eq!(s.points, vec![1e8, 1e9]);
    assert!(s.rates_are_bits);
    assert_eq!(s.base.target, Target::Embedded);
    for (args, needle) in [
        ("sweep udp", "--pps"),
        ("sweep udp --pps 10:1:1", "--pps"),
        ("sweep udp --pps 1k --sizes 10", "--sizes"),
        ("sweep udp --pps 1:100000:1", "--pps"),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

fn rr(args: &str) -> RrConfig {
    match parse(args).expect("parses") {
        Command::Rr(c) => c,
        other => panic!("not rr: {other:?}"),
    }
}

#[test]
fn rr_defaults_and_flags() {
    let c = rr("rr");
    assert_eq!(c.client.target, Target::Embedded);
    assert_eq!(c.client.spec.kind, TestKind::Rr);
    assert!(c.client.spec.tcp.no_delay);
    let r = c.client.spec.rr.expect("rr spec");
    assert_eq!(r.sizes, DEFAULT_RR_SIZES.to_vec());
    assert_eq!(r.limit, RrLimit::TimeMs(1000));
    assert_eq!((r.batch, r.busy_poll, r.under_load), (1, false, 0));

    let c = rr("rr 198.18.0.2 --sizes 1,64,1K -r 8 -n 500 -P 2 --batch 10 --busy-poll --under-load 2 --histogram h.csv --plot p.svg --json");
    let r = c.client.spec.rr.clone().expect("rr spec");
    assert_eq!(r.sizes, vec![1, 64, 1024]);
    assert_eq!(r.response_size, Some(8));
    assert_eq!(r.limit, RrLimit::Count(500));
    assert_eq!((r.batch, r.busy_poll, r.under_load), (10, true, 2));
    assert_eq!(c.client.spec.streams, 2);
    assert_eq!(c.histogram, Some(PathBuf::from("h.csv")));
    assert_eq!(c.plot, Some(PathBuf::from("p.svg")));
    assert_eq!(
        rr("rr -s 100 -t 250ms").client.spec.rr.expect("rr").limit,
        RrLimit::TimeMs(250)
    );

    let c = rr("crr");
    assert_eq!(c.client.spec.kind, TestKind::Crr);
    assert_eq!(c.client.spec.rr.expect("rr").sizes, vec![1]);
}

/// Issue 27: `rr --rate` paces each flow, as qualify's probes are.
#[test]
fn issue_27_rr_rate_paces_each_flow() {
    let c = rr("rr 127.0.0.1 --rate 250 -P 2 --proto udp");
    assert_eq!(c.client.spec.rr.expect("rr").rate, Some(250));
    assert_eq!(rr("rr 127.0.0.1").client.spec.rr.expect("rr").rate, None);
}

#[test]
fn rr_refusals_name_the_flag() {
    for (args, needle) in [
        ("crr --proto udp", "no UDP form"),
        ("rr --proto sctp", "--proto"),
        ("rr --sizes 1,0", "--sizes"),
        ("rr --sizes ,", "--sizes"),
        ("rr -s 1 --sizes 2", "--sizes"),
        ("rr -n 0", "--count"),
        ("rr -t 0", "--time"),
        ("rr -t 1 -n 5", "--count"),
        ("rr -P 0", "--parallel"),
        ("rr --batch 0", "--batch"),
        ("rr --under-load 0", "--under-load"),
        ("crr --server-engine uring", "crr has no server engine"),
        ("rr --rate 0", "--rate"),
        ("rr --rate 1000001", "--rate"),
        ("crr --rate 10", "--rate"),
        ("rr --transport unix --rate 10", "--rate"),
        (
            "rr 198.18.0.2 --proto udp --engine xdp --xdp-sleep --busy-poll",
            "--xdp-sleep and --busy-poll ask for opposite waits",
        ),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

/// `rr --rate` with TCP event-loop flows is paced on the loops, not refused.
#[test]
fn issue_27_rr_rate_goes_with_tcp_flows() {
    let c = rr("rr --flows 16 --threads 2 --rate 200");
    assert_eq!(c.client.spec.rr.expect("rr").rate, Some(200));
    let c = rr("rr --proto udp --flows 16 --threads 2 --rate 200");
    assert_eq!(c.client.spec.rr.expect("rr").rate, Some(200));
}

#[test]
fn netperf_rr_names() {
    let c = rr("TCP_RR -H 198.18.0.2");
    assert_eq!(c.client.spec.kind, TestKind::Rr);
    // netperf's default: one 1-byte size.
    assert_eq!(c.client.spec.rr.clone().expect("rr").sizes, vec![1]);
    let r = rr("TCP_RR -H 198.18.0.2 -l 5 -- -r 64,1024")
        .client
        .spec
        .rr
        .expect("rr");
    assert_eq!((r.sizes, r.response_size), (vec![64], Some(1024)));
    assert_eq!(r.limit, RrLimit::TimeMs(5000));
    let r = rr("TCP_RR 198.18.0.2 --sizes 8,16")
        .client
        .spec
        .rr
        .expect("rr");
    assert_eq!(r.sizes, vec![8, 16]);
    assert_eq!(rr("TCP_CRR 198.18.0.2").client.spec.kind, TestKind::Crr);
    assert_eq!(
        rr("-t TCP_RR -H 198.18.0.2 -l -1000")
            .client
            .spec
            .rr
            .expect("rr")
            .limit,
        RrLimit::Count(1000)
    );
    let u = rr("UDP_RR -H 198.18.0.2").client.spec;
    assert_eq!((u.kind, u.protocol), (TestKind::Rr, Protocol::Udp));
}

#[test]
fn server_flags() {
    match parse("server --port 6001 --once --max-concurrent 3 --bind 127.0.0.1").expect("parses") {
        Command::Server(s) => {
            assert_eq!(s.port, 6001);
            assert!(s.once);
            assert_eq!(s.max_concurrent, 3);
            assert_eq!(s.bind, Some("127.0.0.1".parse().expect("ip")));
        }
        other => panic!("not server: {other:?}"),
    }
}

#[test]
fn issue_8_unpaced_udp_gets_deep_socket_buffers_within_the_memory_limit() {
    let window = |args: &str| udp(args).spec.udp.expect("udp").window;
    assert_eq!(window("udp h -b 0"), Some(32 << 20));
    // 16 connections: 1 GiB / 2 / (4 × 16).
    assert_eq!(window("udp h -b 0 -P 8 --bidir"), Some(8 << 20));
    // Too many sockets for 1 MiB each: the kernel's default.
    assert_eq!(window("udp h -b 0 -P 200"), None);
    // A paced test, or one with -w, is left as asked.
    assert_eq!(window("udp h -b 1G"), None);
    assert_eq!(window("udp h -b 0 -w 1M"), Some(1 << 20));
}

#[test]
fn cpus_are_checked_against_the_affinity_mask_by_id() {
    assert_eq!(cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
    assert_eq!(cpu_list(&[1]), "1");
    let allowed = linerate_engine::cpu::allowed_cpus();
    let last = *allowed.last().expect("some CPU");
    // The highest allowed id passes even where fewer CPUs are allowed than
    // its number (`taskset -c 1`: one CPU, id 1).
    assert_eq!(
        parse_cpus(Some(&last.to_string())).expect("allowed"),
        vec![last]
    );
    let e = parse_cpus(Some("4095"))
        .expect_err("not allowed")
        .to_string();
    assert!(
        e.contains("CPU 4095 is not available to this process (it may run on"),
        "{e}"
    );
}

#[test]
fn issue_8_server_engine_auto_is_offered_unless_a_list_leaves_it_out() {
    let auto_offer = |allow: Option<&str>| {
        linerate_run::config::engine_offers(allow)
            .expect("offers")
            .into_iter()
            .find(|o| o.name == AUTO)
            .expect("auto is among the offers")
            .refused
    };
    assert_eq!(auto_offer(None), None, "offered by default");
    assert_eq!(auto_offer(Some("syscall,auto")), None, "listed");
    for list in ["syscall", "none"] {
        let why = auto_offer(Some(list)).expect("refused");
        assert!(why.contains("not allowed on this server"), "{list}: {why}");
    }
    assert_eq!(
        tcp("tcp --server-engine auto").server_engine.as_deref(),
        Some(AUTO)
    );
    let e = parse("tcp --server-engine warp")
        .expect_err("unknown")
        .to_string();
    assert!(e.contains("--server-engine (auto, or an engine)"), "{e}");
}

#[test]
fn issue_28_iperf3_habits_get_the_linerate_spelling() {
    // `tcp -u`: point at `linerate udp`, not at clap's `-- -u`.
    let e = parse("tcp 127.0.0.1 -u")
        .expect_err("no -u on tcp")
        .to_string();
    assert!(e.contains("linerate udp HOST"), "{e}");
    assert!(!e.contains("-- -u"), "{e}");
    // A negative duration is a clear error, on every test command.
    for args in ["tcp -t -1", "udp -t -1", "rr -t -1"] {
        let e = parse(args).expect_err("negative time").to_string();
        assert!(e.contains("--time: -1 is negative"), "{args}: {e}");
    }
    // `-i 0` turns interval lines off; intervals are still measured at 1 s.
    let c = tcp("tcp -i 0");
    assert!(c.quiet_intervals);
    assert_eq!(c.spec.interval_ms, 1000);
    assert!(udp("udp -i 0").quiet_intervals);
    assert!(!tcp("tcp -i 0.5").quiet_intervals);
    let e = parse("tcp -i 5ms").expect_err("too short").to_string();
    assert!(e.contains("or 0: no interval lines"), "{e}");
}

#[test]
fn issue_26_udp_flows_parse_and_refuse_what_loops_do_not_do() {
    let Command::Udp(c) = parse("udp --flows 64 --threads 2 -b 1M").expect("parses") else {
        panic!("not udp");
    };
    assert_eq!(
        c.spec.flows,
        Some(linerate_proto::spec::Flows {
            count: 64,
            threads: 2
        })
    );
    assert_eq!(c.spec.protocol, linerate_proto::spec::Protocol::Udp);
    for (args, needle) in [
        ("udp --flows 4 --priority -5", "--priority"),
        ("udp --flows 4 --busy-poll", "--busy-poll"),
        (
            "udp 198.18.0.1 --flows 4 --iperf3",
            "iperf3 server takes -P",
        ),
        ("udp --flows 0", "--flows"),
        ("udp --threads 2", "--flows"),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

#[test]
fn issue_26_crr_flows_and_linger0_parse_and_refuse_what_loops_do_not_do() {
    let c = rr("crr --flows 64 --threads 2 --linger0");
    let spec = &c.client.spec;
    assert_eq!(spec.kind, TestKind::Crr);
    assert_eq!(
        spec.flows,
        Some(linerate_proto::spec::Flows {
            count: 64,
            threads: 2
        })
    );
    assert!(spec.tcp.linger0);
    assert!(!rr("crr --flows 4").client.spec.tcp.linger0);
    for (args, needle) in [
        ("crr --flows 4 --busy-poll", "--busy-poll"),
        ("crr --flows 0", "--flows"),
        ("crr --threads 2", "--flows"),
        ("rr --linger0", "--linger0 is for crr"),
    ] {
        let e = parse(args).expect_err(args).to_string();
        assert!(e.contains(needle), "{args}: {e}");
    }
}

/// Issue 26: a server's own `--engine` is asked about each test at
/// admission with the refusal its client gives (`uring --flows` on a host
/// without multishot receives failed at run time).
#[test]
fn issue_26_a_servers_own_engine_refuses_at_admission_what_its_client_would() {
    use linerate_proto::spec::{Flows, TestSpec};
    // Where this kernel has no io_uring, `--engine uring` is refused
    // when parsed: nothing to ask.
    let Ok(Command::Server(s)) = parse("server --engine uring") else {
        return;
    };
    let uring = EngineKind::Uring { sqpoll: false };
    let refusal = s
        .limits
        .own_engine_refusal
        .as_ref()
        .expect("asked at admission");
    let spec = TestSpec {
        flows: Some(Flows {
            count: 8,
            threads: 2,
        }),
        ..TestSpec::default()
    };
    assert_eq!(refusal.of(&spec), uring.refusal(&spec));
    let udp = TestSpec {
        protocol: Protocol::Udp,
        ..spec
    };
    assert_eq!(refusal.of(&udp), uring.refusal(&udp));
}

/// Issue 28 (found this round): `--repeat N --auth-key FILE` lost the key,
/// since `--repeat` wrapped the test before the key was given, so every
/// trial against a keyed server failed authentication. The key reaches
/// the repeated test, whichever kind.
#[test]
fn issue_28_repeat_keeps_the_auth_key() {
    let dir = std::env::temp_dir().join(format!("lr-repeat-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("k.key");
    std::fs::write(&key, "Zq4vN0p7Rk2Xw9sLm3Tb8Yc1Hd6Ej5Fa").expect("key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("mode");
    }
    let k = key.display();
    for test in ["tcp 127.0.0.1", "udp 127.0.0.1", "rr 127.0.0.1"] {
        let cmd = parse(&format!("{test} --repeat 2 --auth-key {k}")).expect("parses");
        let Command::Repeat(r) = cmd else {
            panic!("{test}: not a repeat: {cmd:?}");
        };
        let has_key = match *r.test {
            Command::Tcp(c) | Command::Udp(c) => c.auth_key.is_some(),
            Command::Rr(r) => r.client.auth_key.is_some(),
            other => panic!("{test}: {other:?}"),
        };
        assert!(has_key, "{test}: the repeated test has no key");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
