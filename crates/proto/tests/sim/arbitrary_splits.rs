//! Simulated pair: frames cut at arbitrary points across reads (proptest).

use linerate_proto::limits::ServerLimits;
use linerate_proto::session::client::ClientSession;
use linerate_proto::session::server::{Admission, ServerAction, ServerOutcome, ServerSession};
use linerate_proto::spec::{Direction, TestSpec};
use linerate_proto::wire::{self};
use proptest::prelude::*;

use crate::harness::*;

/// Length of the first frame in `bytes`.
fn frame_len(bytes: &[u8]) -> usize {
    wire::decode(bytes)
        .expect("valid frame")
        .expect("complete frame")
        .1
}

/// Feeds `bytes` to `f` cut at the offsets `cuts` pick (each modulo the length).
fn feed_cut(bytes: &[u8], cuts: &[prop::sample::Index], mut f: impl FnMut(&[u8])) {
    let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    points.extend([0, bytes.len()]);
    points.sort_unstable();
    points.dedup();
    for w in points.windows(2) {
        f(&bytes[w[0]..w[1]]);
    }
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![
        Just(Direction::Forward),
        Just(Direction::Reverse),
        Just(Direction::Bidir)
    ]
}

proptest! {
    /// Any way of cutting the control bytes into reads completes the test.
    #[test]
    fn happy_path_completes_at_any_chunk_boundaries(
        chunks in proptest::collection::vec(1usize..48, 1..12),
        direction in direction(),
        streams in 1u16..=4,
        client_first in any::<bool>(),
    ) {
        happy_path(spec(direction, streams), chunks, client_first);
    }

    /// The happy-path exchange, captured once, then re-fed to fresh sessions
    /// cut at arbitrary byte offsets, with frames that may arrive together
    /// coalesced into one buffer, gives the same outcome and the same bytes.
    #[test]
    fn captured_exchange_replays_at_any_cut_points(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..16),
        direction in direction(),
        streams in 1u16..=4,
    ) {
        let mut p = Pair::new(spec(direction, streams));
        let agreed = p.start();
        let (cr, sr) = p.finish(&agreed, true);
        assert_completed(&p, &agreed, &cr, &sr);
        let now = p.now;

        // Server: Hello | (streams attach) | Results.
        let hello_len = frame_len(&p.client_sent);
        let (hello, rest) = p.client_sent.split_at(hello_len);
        let mut server = ServerSession::new(ServerLimits::default(), TOKEN, SERVER_SW, now);
        feed_cut(hello, &cuts, |b| server.receive(b, now));
        prop_assert_eq!(server.poll_action(), Some(ServerAction::RequestAdmission));
        server.admission(Admission::Admit, now);
        for sp in agreed.stream_plan() {
            server.stream_attached(&data_hello(TOKEN, sp.id, sp.sender), now).expect("attach");
        }
        feed_cut(rest, &cuts, |b| server.receive(b, now));
        server.local_finished(sr.clone(), now);
        match server.outcome() {
            Some(ServerOutcome::Completed { local, remote, .. }) => {
                prop_assert_eq!(local, &sr);
                prop_assert_eq!(remote, &cr);
            }
            other => prop_assert!(false, "replayed server did not complete: {:?}", other),
        }
        prop_assert_eq!(server.outbox().take(), p.server_sent.clone());

        // Client: Accept | (streams open) | Start and Results together.
        let accept_len = frame_len(&p.server_sent);
        let (accept, rest) = p.server_sent.split_at(accept_len);
        let mut client = ClientSession::new(spec(direction, streams), CLIENT_SW, now);
        feed_cut(accept, &cuts, |b| client.receive(b, now));
        client.streams_opened(now);
        feed_cut(rest, &cuts, |b| client.receive(b, now));
        client.local_finished(cr.clone(), now);
        let (local, remote) = client.outcome().expect("finished").expect("completed");
        prop_assert_eq!(local, &cr);
        prop_assert_eq!(remote, &sr);
        prop_assert_eq!(client.outbox().take(), p.client_sent.clone());
    }

    /// Random bytes in any state never panic and, if they end the session,
    /// end it with an error outcome.
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        stage in prop_oneof![Just(Stage::Fresh), Just(Stage::Accepted), Just(Stage::Opened), Just(Stage::Running)],
        chunk in 1usize..16,
    ) {
        let (mut p, _) = pair_at(stage, TestSpec::default());
        let _ = p.client.outbox().take();
        p.chunks = vec![chunk];
        p.deliver_to_client(&bytes);
        p.deliver_to_server(&bytes);
        prop_assert!(p.client_aborts() <= 1);
        prop_assert!(p.server_aborts() <= 1);
        if p.client.is_finished() {
            prop_assert!(p.client.outcome().is_some_and(|o| o.is_err()));
        }
        if p.server.is_finished() {
            let completed = matches!(p.server.outcome(), Some(ServerOutcome::Completed { .. }));
            prop_assert!(!completed, "random bytes completed a test");
        }
    }
}
