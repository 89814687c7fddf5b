//! `--auth-key`: the right key works for every test kind; a wrong key, a
//! missing key, a key on one side only and a replayed handshake are refused
//! with clear messages on both sides; connections that never prove the key
//! take no test slot, and are bounded per source and in time (issue 28).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use linerate_proto::auth::{AuthKey, ClientAuth, NONCE_LEN};
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::{Message, RefuseCode};

use super::{connect_from, logged_server, Raw};
use crate::helpers::{eventually, run_client, stderr};

/// Writes `key` to a file unique to this process and test.
fn key_file(name: &str, key: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("linerate-{}-{name}.key", std::process::id()));
    std::fs::write(&p, format!("{key}\n")).expect("write key");
    p
}

const KEY_A: &str = "a fleet-wide secret, 32 bytes ok";
const KEY_B: &str = "another secret, entirely unknown";

fn log_has(log: &std::sync::Arc<std::sync::Mutex<String>>, needle: &str) -> bool {
    eventually(Duration::from_secs(5), || {
        log.lock().is_ok_and(|l| l.contains(needle))
    })
}

#[test]
fn issue_10_the_right_key_works_for_every_test_kind() {
    let key = key_file("right", KEY_A);
    let k = key.to_str().expect("utf-8 path");
    let (server, _log) = logged_server(&["--auth-key", k]);
    let port = server.port_str();
    for args in [
        &["tcp", "-t", "0.3"][..],
        &["tcp", "-t", "0.3", "-R", "-P", "2"],
        &["tcp", "-t", "0.3", "--bidir"],
        &["udp", "-t", "0.3", "--pps", "1000"],
        &["udp", "-t", "0.3", "--pps", "1000", "-R"],
        &["rr", "--sizes", "64", "-n", "200"],
        &["crr", "-n", "50"],
    ] {
        let mut all = vec![args[0], "127.0.0.1", "-p", &port, "--auth-key", k];
        all.extend_from_slice(&args[1..]);
        let out = run_client(&all, Duration::from_secs(60));
        assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    }
    // The environment variable names the file too.
    let out = std::process::Command::new(crate::helpers::bin())
        .args(["tcp", "127.0.0.1", "-p", &port, "-t", "0.3"])
        .env("LINERATE_AUTH_KEY_FILE", &key)
        .output()
        .expect("run");
    assert!(out.status.success(), "env: {}", stderr(&out));
    // And the embedded server takes the client's key.
    let out = run_client(
        &["tcp", "-t", "0.3", "--auth-key", k],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "embedded: {}", stderr(&out));
}

#[test]
fn issue_10_a_wrong_or_one_sided_key_is_refused_on_both_sides() {
    let a = key_file("wrong-a", KEY_A);
    let b = key_file("wrong-b", KEY_B);
    let (a, b) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let (keyed, keyed_log) = logged_server(&["--auth-key", a]);
    let (open, open_log) = logged_server(&[]);
    let cases = [
        (
            keyed.port_str(),
            Some(b),
            "does not match our key",
            &keyed_log,
            "the client refuses the server",
        ),
        (
            keyed.port_str(),
            None,
            "requires a pre-shared key",
            &keyed_log,
            "requires a pre-shared key",
        ),
        (
            open.port_str(),
            Some(a),
            "has no pre-shared key",
            &open_log,
            "has no pre-shared key",
        ),
    ];
    for (port, key, client_says, log, server_says) in cases {
        let mut args = vec!["tcp", "127.0.0.1", "-p", &port, "-t", "0.3"];
        if let Some(k) = key {
            args.extend(["--auth-key", k]);
        }
        let out = run_client(&args, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("authentication failed") && err.contains(client_says),
            "{args:?}: {err}"
        );
        assert!(
            log_has(log, server_says),
            "{args:?}: server log lacks {server_says:?}"
        );
    }
    let out = run_client(
        &[
            "tcp",
            "127.0.0.1",
            "-p",
            "1",
            "--auth-key",
            "/nonexistent/key",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--auth-key"), "{}", stderr(&out));
}

#[test]
fn issue_10_a_replayed_handshake_is_refused() {
    let file = key_file("replay", KEY_A);
    let (server, log) = logged_server(&["--auth-key", file.to_str().expect("utf-8")]);
    let key = AuthKey::from_file_contents(KEY_A.as_bytes()).expect("key");
    let me = ClientAuth::new(key, [7; NONCE_LEN]);
    // A genuine exchange, recorded.
    let mut first = Raw::connect(server.port);
    first.send(&Message::AuthInit(me.init()));
    let Some(Message::AuthChallenge(c)) = first.recv(Duration::from_secs(5)) else {
        panic!("no challenge");
    };
    let proof = me.on_challenge(&c).expect("the server proves the key");
    first.send(&Message::AuthProof(proof.clone()));
    first.hello(TestSpec::default());
    assert!(matches!(
        first.recv(Duration::from_secs(5)),
        Some(Message::Accept(_))
    ));
    drop(first);
    // The recording, replayed on a new connection: the server's nonce differs.
    let mut replay = Raw::connect(server.port);
    replay.send(&Message::AuthInit(me.init()));
    let Some(Message::AuthChallenge(c2)) = replay.recv(Duration::from_secs(5)) else {
        panic!("no challenge");
    };
    assert_ne!(c2.nonce, c.nonce, "the server reused its nonce");
    replay.send(&Message::AuthProof(proof));
    replay.hello(TestSpec::default());
    match replay.recv(Duration::from_secs(5)) {
        Some(Message::Refuse(r)) => {
            assert_eq!(r.code, RefuseCode::Auth);
            assert!(r.message.contains("proof does not match"), "{}", r.message);
        }
        other => panic!("replay not refused: {other:?}"),
    }
    assert!(log_has(&log, "proof does not match"));
}

#[test]
fn issue_28_auth_key_files_are_checked_before_use() {
    let client = |key: &str| {
        run_client(
            &[
                "tcp",
                "127.0.0.1",
                "-p",
                "1",
                "-t",
                "0.1",
                "--auth-key",
                key,
            ],
            Duration::from_secs(10),
        )
    };
    // A device is refused without being read (it used to be read whole:
    // /dev/zero took the process to 3.2 GB).
    let out = client("/dev/zero");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
    let long = key_file("long", &"k".repeat(5000));
    let out = client(long.to_str().expect("utf-8"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("over 4096 bytes"), "{}", stderr(&out));
    // A world-readable key of one repeated letter is used, with warnings.
    let weak = key_file("weak", "aaaaaaaaaaaaaaaa");
    std::fs::set_permissions(&weak, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod");
    let err = stderr(&client(weak.to_str().expect("utf-8")));
    assert!(err.contains("can be read by other users"), "{err}");
    assert!(err.contains("looks weak"), "{err}");
    // A private, random key draws neither warning.
    std::fs::set_permissions(&long, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let good = key_file("good", KEY_A);
    std::fs::set_permissions(&good, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let err = stderr(&client(good.to_str().expect("utf-8")));
    assert!(!err.contains("warning"), "{err}");
    for f in [long, weak, good] {
        let _ = std::fs::remove_file(f);
    }
}
/// A raw connection that sent an AuthInit, got its challenge and then
/// says nothing more (an attacker without the key holding the handshake).
fn silent_after_auth_init(mut raw: Raw, nonce: u8) -> Raw {
    let key = AuthKey::from_file_contents(KEY_B.as_bytes()).expect("key");
    raw.send(&Message::AuthInit(
        ClientAuth::new(key, [nonce; NONCE_LEN]).init(),
    ));
    match raw.recv(Duration::from_secs(5)) {
        Some(Message::AuthChallenge(_)) => raw,
        other => panic!("no challenge: {other:?}"),
    }
}

#[test]
fn issue_28_unauthenticated_connections_do_not_take_the_test_slot() {
    let file = key_file("slot", KEY_A);
    let k = file.to_str().expect("utf-8");
    let (server, _log) = logged_server(&["--auth-key", k, "--max-concurrent", "1"]);
    let _silent: Vec<Raw> = (0..3)
        .map(|i| silent_after_auth_init(Raw::connect(server.port), i))
        .collect();
    let port = server.port_str();
    let out = run_client(
        &["tcp", "127.0.0.1", "-p", &port, "-t", "1", "--auth-key", k],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "keyed client: {}", stderr(&out));
}

#[test]
fn issue_28_the_pre_auth_phase_is_bounded_per_source_and_in_time() {
    let file = key_file("preauth", KEY_A);
    let k = file.to_str().expect("utf-8");
    let (server, log) = logged_server(&["--auth-key", k, "--handshake-timeout", "2s"]);
    let from_other = |i| {
        let sock = connect_from("127.0.0.2", server.port);
        silent_after_auth_init(Raw::from_stream(sock), i)
    };
    let held: Vec<Raw> = (0..4).map(from_other).collect();
    // A fifth from the same host is refused at once, in words.
    let key = AuthKey::from_file_contents(KEY_B.as_bytes()).expect("key");
    let mut fifth = Raw::from_stream(connect_from("127.0.0.2", server.port));
    fifth.send(&Message::AuthInit(
        ClientAuth::new(key, [9; NONCE_LEN]).init(),
    ));
    match fifth.recv(Duration::from_secs(5)) {
        Some(Message::Refuse(r)) => {
            assert_eq!(r.code, RefuseCode::Busy);
            assert!(r.message.contains("not authenticated"), "{}", r.message);
        }
        other => panic!("fifth pre-auth connection not refused: {other:?}"),
    }
    assert!(log_has(
        &log,
        "127.0.0.2: 4 connections not authenticated yet"
    ));
    // Another host is not held up by them.
    let port = server.port_str();
    let out = run_client(
        &[
            "tcp",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "0.3",
            "--auth-key",
            k,
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "keyed client: {}", stderr(&out));
    drop(held);
    // The handshake timeout bounds the whole phase from the connection's
    // accept: sending the AuthInit late does not restart it.
    let opened = Instant::now();
    let sock = connect_from("127.0.0.2", server.port);
    std::thread::sleep(Duration::from_millis(1800));
    let mut late = silent_after_auth_init(Raw::from_stream(sock), 10);
    while late.recv(Duration::from_secs(10)).is_some() {}
    let held_for = opened.elapsed();
    assert!(
        held_for < Duration::from_millis(3000),
        "a silent connection was held {held_for:?} with --handshake-timeout 2s"
    );
}
