//! `-O` over linerate's TCP streams: both ends leave out the same warm-up
//! (issue 28).
//!
//! Each side's interval cutter ends the warm-up on its own timer
//! ([`crate::interval`]), so under load the two ends' cuts fall at
//! different bytes of the stream: a receiver whose sampler woke late, or
//! that reads what the sender queued a while ago, cuts at another offset
//! than the sender did, and the two measured totals differed by 0.05–1.4 %
//! of a 2 s test on a loaded 2-CPU host. TCP bytes carry no send stamp (as
//! linerate's datagrams do, [`crate::udp_receiver::Warmup`]), but a stream
//! is one ordered byte sequence: either end's cut is a byte offset (its
//! `omitted_bytes`, what it moved before its timer crossed `omit`), and
//! the other end's warm-up can be exactly the bytes below that offset.
//!
//! Whose offset: the client's, for every stream, sent or received. The
//! client prints its interval records live (human lines, `--json-lines`),
//! cut by its own timer, before any peer's number could reach it; with
//! its cut standing, what it printed after the warm-up adds up to the
//! totals it prints at the end, in every format, without a message in
//! the middle of the test. (The sender's offset, the rule before, moved a
//! `-R` client's totals away from the lines it had already printed.) The
//! server prints nothing live: its report, at the end, is built from the
//! agreed results.
//!
//! Each side's offsets travel in its `Results` at the end (the field
//! every linerate peer already sends), and each session, once it holds
//! both sides' results ([`crate::session`]'s shared `Exchange`), moves the
//! server's cut to the client's with [`agree`]: its totals and the
//! intervals they add up to (the bytes between the two cuts move across
//! the boundary between the omitted and the measured intervals). Both ends
//! then count the same measured bytes. An older peer moved the receiver's
//! cut to the sender's instead: each end's report is still whole in
//! itself, and the two differ by the bytes between the cuts, as between
//! two iperf3s. UDP streams are cut by their stamps already and are left
//! alone; iperf3's streams never come here (iperf3 peers cut each on its
//! own timer, iperf3's rule).

use crate::measure::{IntervalMeasurement, SideResults, StreamMeasurement};
use crate::wire::Side;

/// Moves the server's warm-up of every TCP stream `me` and the peer both
/// measured to the client's offset, on whichever side (`local` or
/// `remote`) is the server's.
pub fn agree(me: Side, local: &mut SideResults, remote: &mut SideResults) {
    for i in 0..local.streams.len() {
        let id = local.streams[i].id;
        let Some(j) = remote.streams.iter().position(|s| s.id == id) else {
            continue;
        };
        let (l, r) = (&local.streams[i], &remote.streams[j]);
        if !is_tcp(l) || !is_tcp(r) || l.sender.is_none() || l.sender != r.sender {
            continue;
        }
        match me {
            Side::Client => {
                let offset = l.omitted_bytes;
                cut_at(&mut remote.streams[j], &mut remote.intervals, offset);
            }
            Side::Server => {
                let offset = r.omitted_bytes;
                cut_at(&mut local.streams[i], &mut local.intervals, offset);
            }
        }
    }
}

fn is_tcp(m: &StreamMeasurement) -> bool {
    m.udp_send.is_none() && m.udp_recv.is_none()
}

/// The largest share of a stream (1/`SHIFT_MAX_DIV`) by which a client's
/// offset may move the server's own cut. The two timers' cuts differ by
/// what was in flight and by scheduling delay (measured: at most 1.4 % of
/// a 2 s test on a loaded host); a peer's offset further off is not the
/// same stream's cut (a faulty or hostile peer, or an end that failed
/// early), and the server keeps its own, so a peer cannot move more
/// than a quarter of what this side measured.
const SHIFT_MAX_DIV: u64 = 4;

/// The server's stream `m`, and its side's `intervals`, with the warm-up
/// ending at byte `offset` (at most the whole stream), where that is near
/// the server's own cut ([`SHIFT_MAX_DIV`]).
fn cut_at(m: &mut StreamMeasurement, intervals: &mut [IntervalMeasurement], offset: u64) {
    let whole = m.bytes.saturating_add(m.omitted_bytes);
    let omitted = offset.min(whole);
    if omitted == m.omitted_bytes || omitted.abs_diff(m.omitted_bytes) > whole / SHIFT_MAX_DIV {
        return;
    }
    move_boundary(intervals, m.id, m.omitted_bytes, omitted);
    m.omitted_bytes = omitted;
    m.bytes = whole - omitted;
}

/// Moves stream `id`'s bytes across the boundary between the omitted
/// intervals (which come first) and the measured ones, so the omitted
/// ones hold `to` bytes instead of `from`: what the warm-up gains comes
/// from the first measured intervals into the last omitted one, what it
/// loses from the last omitted intervals into the first measured one.
/// Without intervals on both sides of the boundary (records dropped for
/// size) nothing moves.
fn move_boundary(intervals: &mut [IntervalMeasurement], id: u32, from: u64, to: u64) {
    let split = intervals.iter().position(|iv| !iv.omitted);
    let split = split.unwrap_or(intervals.len());
    let (warm, measured) = intervals.split_at_mut(split);
    let (source, into): (Vec<&mut u64>, Option<&mut u64>) = if to > from {
        let into = warm.iter_mut().rev().find_map(|iv| stream_bytes(iv, id));
        let source = measured.iter_mut().filter_map(|iv| stream_bytes(iv, id));
        (source.collect(), into)
    } else {
        let into = measured.iter_mut().find_map(|iv| stream_bytes(iv, id));
        let source = warm.iter_mut().rev().filter_map(|iv| stream_bytes(iv, id));
        (source.collect(), into)
    };
    let Some(into) = into else {
        return;
    };
    let mut left = to.abs_diff(from);
    for b in source {
        let take = left.min(*b);
        *b -= take;
        // A peer's own intervals are its numbers: saturate, never wrap.
        *into = into.saturating_add(take);
        left -= take;
        if left == 0 {
            break;
        }
    }
}

/// Stream `id`'s bytes in one interval record.
fn stream_bytes(iv: &mut IntervalMeasurement, id: u32) -> Option<&mut u64> {
    iv.streams
        .iter_mut()
        .find(|s| s.id == id)
        .map(|s| &mut s.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::IntervalStream;

    fn stream(id: u32, bytes: u64, omitted_bytes: u64) -> StreamMeasurement {
        StreamMeasurement {
            id,
            sender: Some(Side::Client),
            bytes,
            omitted_bytes,
            ..StreamMeasurement::default()
        }
    }

    fn side(streams: Vec<StreamMeasurement>, per_interval: &[(bool, u64)]) -> SideResults {
        let intervals = per_interval
            .iter()
            .map(|&(omitted, bytes)| IntervalMeasurement {
                omitted,
                streams: streams
                    .iter()
                    .map(|s| IntervalStream {
                        id: s.id,
                        bytes,
                        ..IntervalStream::default()
                    })
                    .collect(),
                ..IntervalMeasurement::default()
            })
            .collect();
        SideResults {
            streams,
            intervals,
            ..SideResults::default()
        }
    }

    fn per_interval(r: &SideResults) -> Vec<u64> {
        r.intervals.iter().map(|iv| iv.streams[0].bytes).collect()
    }

    #[test]
    fn issue_28_the_server_leaves_out_the_bytes_below_the_clients_offset() {
        // The client sent 1000 bytes, 300 before it crossed omit; the
        // server's timer cut later, at 450.
        let client = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        let server = side(
            vec![stream(1, 550, 450)],
            &[(true, 200), (true, 250), (false, 100), (false, 450)],
        );
        for me in [Side::Client, Side::Server] {
            let (mut c, mut s) = (client.clone(), server.clone());
            match me {
                Side::Client => agree(me, &mut c, &mut s),
                Side::Server => agree(me, &mut s, &mut c),
            }
            assert_eq!(c, client, "the client's cut stands");
            assert_eq!((s.streams[0].bytes, s.streams[0].omitted_bytes), (700, 300));
            assert_eq!(per_interval(&s), [200, 100, 250, 450]);
        }
        // `-R`: the server sent, and cut at 300; the client received and
        // cut later, at 450, and printed its intervals from there: the
        // server's warm-up takes from its first measured intervals.
        let mut server = side(
            vec![stream(1, 700, 300)],
            &[(true, 300), (false, 100), (false, 600)],
        );
        let mut client = side(vec![stream(1, 550, 450)], &[(true, 450), (false, 550)]);
        for s in [&mut server, &mut client] {
            s.streams[0].sender = Some(Side::Server);
        }
        let before = client.clone();
        agree(Side::Server, &mut server, &mut client);
        assert_eq!(client, before, "the client's cut stands");
        assert_eq!(server.streams[0].bytes, 550);
        assert_eq!(per_interval(&server), [450, 0, 550]);
    }

    #[test]
    fn issue_28_udp_streams_and_streams_without_a_peer_are_left_alone() {
        // The client's results (it sent), and the server's.
        let sender = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        let mut udp = stream(1, 550, 450);
        udp.udp_recv = Some(Default::default());
        let mut receiver = side(vec![udp], &[(true, 450), (false, 550)]);
        let before = receiver.clone();
        agree(Side::Client, &mut sender.clone(), &mut receiver);
        assert_eq!(receiver, before);
        let mut other = side(vec![stream(2, 550, 450)], &[(true, 450), (false, 550)]);
        let before = other.clone();
        agree(Side::Client, &mut sender.clone(), &mut other);
        assert_eq!(other, before);
        // A server that got far less than the client's offset (it failed
        // early) keeps its own cut.
        let mut short = side(vec![stream(1, 100, 100)], &[(true, 100), (false, 100)]);
        let before = short.clone();
        agree(Side::Client, &mut sender.clone(), &mut short);
        assert_eq!(short, before);
    }

    /// A peer's offset far from this side's own cut (review, issue 28: a
    /// peer claiming `u64::MAX` emptied the other end's measured bytes)
    /// is ignored, and a peer's own interval bytes near `u64::MAX`
    /// saturate instead of overflowing.
    #[test]
    fn issue_28_a_peers_offset_far_from_the_own_cut_is_ignored() {
        let mut hostile = side(vec![stream(1, 0, u64::MAX)], &[(true, 1), (false, 0)]);
        let mut server = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        let before = server.clone();
        agree(Side::Server, &mut server, &mut hostile);
        assert_eq!(server, before);
        // The client cut at 350; the server's own intervals, in the
        // client's view the peer's numbers, hold near u64::MAX.
        let mut client = side(vec![stream(1, 650, 350)], &[(true, 350), (false, 650)]);
        let mut server = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        server.intervals[1].streams[0].bytes = u64::MAX;
        agree(Side::Client, &mut client, &mut server);
        assert_eq!(server.streams[0].omitted_bytes, 350);
        assert_eq!(per_interval(&server), [350, u64::MAX - 50]);
        server.intervals[0].streams[0].bytes = u64::MAX;
        server.streams[0].omitted_bytes = 300;
        server.streams[0].bytes = 700;
        agree(Side::Client, &mut client, &mut server);
        assert_eq!(per_interval(&server)[0], u64::MAX);
    }
}
