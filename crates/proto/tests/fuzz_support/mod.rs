//! What the fuzz property tests of every crate share (issue 10): the
//! committed seed corpus (`fuzz/corpus/TARGET/`), the input strategy
//! (random bytes, or seeds flipped, cut and spliced) and the bounded
//! proptest configuration. Included by `crates/proto/tests/fuzz.rs` and,
//! by path, by `crates/iperf3/tests/fuzz.rs`.
// Each including test uses only some of these.
#![allow(dead_code)]

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::Config;

/// A fuzz target: bytes in, a panic when a property breaks.
pub type Target = fn(&[u8]);

/// Where `target`'s committed seeds live.
pub fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Deterministic bytes (xorshift).
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `target`'s seeds, in file-name order.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// `cases` cases, shrinking bounded, no failure files.
pub fn cfg(cases: u32) -> Config {
    Config {
        cases,
        // Shrinking only runs on failure; keep it bounded then too.
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Random bytes, or a corpus seed flipped at a few places, cut, and
/// spliced with another seed.
pub fn input(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = corpus(target);
    let n = seeds.len();
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        (
            0..n,
            0..n,
            proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
            any::<usize>(),
            any::<bool>()
        )
            .prop_map(move |(a, b, flips, cut, splice)| {
                let mut s = seeds[a].clone();
                if splice {
                    s.extend_from_slice(&seeds[b]);
                }
                for (at, x) in flips {
                    if !s.is_empty() {
                        let i = at % s.len();
                        s[i] ^= x;
                    }
                }
                if cut % 4 == 0 {
                    s.truncate(cut % (s.len() + 1));
                }
                s
            }),
    ]
}

/// Runs every seed of `targets` through its target; with
/// `LINERATE_WRITE_FUZZ_CORPUS` set, first rewrites the seeds from `seeds`.
pub fn run_seed_corpus(targets: &[(&str, Target)], seeds: impl Fn(&str) -> Vec<Vec<u8>>) {
    for &(name, target) in targets {
        if std::env::var_os("LINERATE_WRITE_FUZZ_CORPUS").is_some() {
            let dir = corpus_dir(name);
            std::fs::create_dir_all(&dir).expect("corpus dir");
            for (k, s) in seeds(name).iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{k:02}")), s).expect("seed");
            }
        }
        let c = corpus(name);
        assert!(!c.is_empty(), "no seeds for {name}");
        for s in &c {
            target(s);
        }
    }
}
