//! Simulated pair: the happy path in every direction.

use std::time::Duration;

use linerate_proto::limits::ServerLimits;
use linerate_proto::session::client::ClientAction;
use linerate_proto::session::server::Admission;
use linerate_proto::spec::{Direction, Limit, TestSpec};

use crate::harness::*;

#[test]
fn happy_path_every_direction_stream_count_and_finish_order() {
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        for streams in [1, 4] {
            for client_first in [true, false] {
                happy_path(spec(direction, streams), Vec::new(), client_first);
            }
        }
    }
}

#[test]
fn happy_path_survives_one_byte_reads() {
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        for streams in [1, 4] {
            for client_first in [true, false] {
                happy_path(spec(direction, streams), vec![1], client_first);
            }
        }
    }
}

#[test]
fn happy_path_byte_limited_has_no_client_deadline_and_the_servers_max_time() {
    let s = TestSpec {
        direction: Direction::Bidir,
        streams: 3,
        limit: Limit::Bytes(1_000_001),
        ..TestSpec::default()
    };
    let mut p = Pair::new(s.clone()).one_byte_reads();
    let spec = p.start();
    assert_eq!(p.client.poll_timeout(), None);
    // issue 10: the server bounds every test by --max-time (24 h default).
    assert!(p.server.poll_timeout().is_some());
    p.advance(Duration::from_secs(3600));
    let (cr, sr) = p.finish(&spec, false);
    assert_completed(&p, &spec, &cr, &sr);
}

#[test]
fn accept_carries_clamped_spec_and_notes_to_the_client() {
    let mut s = spec(Direction::Forward, 2);
    s.tcp.window = Some(8 << 20);
    let limits = ServerLimits {
        max_window: 1 << 20,
        ..ServerLimits::default()
    };
    let mut p = Pair::with(s, limits, Admission::Admit);
    let (_, agreed) = p.handshake();
    assert_eq!(agreed.tcp.window, Some(1 << 20));
    let notes = p
        .client_actions
        .iter()
        .find_map(|a| match a {
            ClientAction::OpenStreams { notes, .. } => Some(notes.clone()),
            _ => None,
        })
        .expect("OpenStreams");
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("window"), "{notes:?}");
}
