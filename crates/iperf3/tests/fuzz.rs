//! Never-panic properties over iperf3's decoders and sessions (issue 10):
//! the stable-toolchain stand-in for `cargo fuzz` on iperf3's targets
//! (`linerate_iperf3::fuzz`), from the committed seeds in
//! `fuzz/corpus/TARGET/` (`LINERATE_WRITE_FUZZ_CORPUS=1 cargo test -p
//! linerate-iperf3 --test fuzz` rewrites them). The corpus and input
//! helpers are the protocol crate's (`crates/proto/tests/fuzz_support`).

use linerate_iperf3::fuzz::{self, TARGETS};
use proptest::prelude::*;

#[path = "../../proto/tests/fuzz_support/mod.rs"]
mod fuzz_support;
use fuzz_support::{cfg, input, noise};

/// The seeds each target starts from.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "iperf3_json" => json_seeds(),
        "iperf3_sessions" => session_seeds(),
        _ => (0..4).map(|k| noise(k + 3, 64 << k)).collect(),
    }
}

fn json_seeds() -> Vec<Vec<u8>> {
    let json =
        br#"{"tcp":true,"omit":0,"time":10,"parallel":1,"len":131072,"client_version":"3.12"}"#;
    let results = br#"{"cpu_util_total":1.0,"cpu_util_user":0.5,"cpu_util_system":0.5,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":1000,"retransmits":0,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1}]}"#;
    let framed = |j: &[u8]| {
        let mut v = (j.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(j);
        v
    };
    vec![framed(json), framed(results), json.to_vec()]
}

fn session_seeds() -> Vec<Vec<u8>> {
    let cookie = b"abcdefghijklmnopqrstuvwxyz2345672345\0";
    let chunk = |to_server: bool, b: &[u8]| {
        let mut v = vec![u8::from(!to_server)];
        v.extend_from_slice(&(b.len() as u16).to_le_bytes());
        v.extend_from_slice(b);
        v
    };
    vec![
        [chunk(true, cookie), chunk(true, &json_seeds()[0])].concat(),
        [chunk(false, &[9]), chunk(false, &[10]), chunk(false, &[1])].concat(),
    ]
}

#[test]
fn issue_10_fuzz_iperf3_seed_corpus_runs_clean() {
    fuzz_support::run_seed_corpus(TARGETS, seeds);
}

proptest! {
    #![proptest_config(cfg(100_000))]
    #[test]
    fn issue_10_fuzz_iperf3_json(bytes in input("iperf3_json")) {
        fuzz::iperf3_json(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_iperf3_sessions(bytes in input("iperf3_sessions")) {
        fuzz::iperf3_sessions(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(10_000))]
    #[test]
    fn issue_24_fuzz_iperf3_datagrams(bytes in input("iperf3_datagrams")) {
        fuzz::iperf3_datagrams(&bytes);
    }
}
