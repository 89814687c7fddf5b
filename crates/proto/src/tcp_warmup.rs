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
//! is one ordered byte sequence: the sender's cut is a byte offset (its
//! `omitted_bytes`, what it wrote before it crossed `omit`), and the
//! receiver's warm-up is exactly the bytes below that offset.
//!
//! The sender's offset travels in its `Results` at the end (the field
//! every linerate peer already sends), and each session, once it holds
//! both sides' results ([`crate::session`]'s shared `Exchange`), moves the
//! receiver's cut to it with [`agree`]: its totals and the intervals
//! they add up to (the bytes between the two cuts move across the
//! boundary between the omitted and the measured intervals). Both ends
//! then count the same measured bytes, whichever of them is older (an
//! older peer's own view keeps its timer's cut). UDP streams are cut by
//! their stamps already and are left alone; iperf3's streams never come
//! here (iperf3 peers cut each on its own timer, iperf3's rule).

use crate::measure::{IntervalMeasurement, SideResults, StreamMeasurement};
use crate::wire::Side;

/// Moves the warm-up of every TCP stream `me` and the peer both measured
/// to the sender's offset, on whichever side (`local` or `remote`)
/// received it.
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
        if l.sender == Some(me) {
            let offset = l.omitted_bytes;
            cut_at(&mut remote.streams[j], &mut remote.intervals, offset);
        } else {
            let offset = r.omitted_bytes;
            cut_at(&mut local.streams[i], &mut local.intervals, offset);
        }
    }
}

fn is_tcp(m: &StreamMeasurement) -> bool {
    m.udp_send.is_none() && m.udp_recv.is_none()
}

/// The largest share of a stream (1/`SHIFT_MAX_DIV`) by which a sender's
/// offset may move its receiver's own cut. The two timers' cuts differ by
/// what was in flight and by scheduling delay (measured: at most 1.4 % of
/// a 2 s test on a loaded host); a peer's offset further off is not the
/// same stream's cut (a faulty or hostile peer, or a receiver that failed
/// early), and the receiver keeps its own, so a peer cannot move more
/// than a quarter of what this side measured.
const SHIFT_MAX_DIV: u64 = 4;

/// A receiver's stream `m`, and its side's `intervals`, with the warm-up
/// ending at byte `offset` (at most the whole stream), where that is near
/// the receiver's own cut ([`SHIFT_MAX_DIV`]).
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
    fn issue_28_the_receiver_leaves_out_the_bytes_below_the_senders_offset() {
        // The client sent 1000 bytes, 300 before it crossed omit; the
        // server's timer cut later, at 450.
        let mut sender = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        let mut receiver = side(
            vec![stream(1, 550, 450)],
            &[(true, 200), (true, 250), (false, 100), (false, 450)],
        );
        for me in [Side::Client, Side::Server] {
            let (mut s, mut r) = (sender.clone(), receiver.clone());
            match me {
                Side::Client => agree(me, &mut s, &mut r),
                Side::Server => agree(me, &mut r, &mut s),
            }
            assert_eq!(s, sender, "the sender's cut stands");
            assert_eq!((r.streams[0].bytes, r.streams[0].omitted_bytes), (700, 300));
            assert_eq!(per_interval(&r), [200, 100, 250, 450]);
        }
        // A receiver that cut earlier (at 100): the warm-up takes from the
        // first measured intervals.
        receiver = side(
            vec![stream(1, 900, 100)],
            &[(true, 100), (false, 150), (false, 750)],
        );
        agree(Side::Client, &mut sender, &mut receiver);
        assert_eq!(receiver.streams[0].bytes, 700);
        assert_eq!(per_interval(&receiver), [300, 0, 700]);
    }

    #[test]
    fn issue_28_udp_streams_and_streams_without_a_peer_are_left_alone() {
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
        // A receiver that got far less than the sender's offset (it
        // failed early) keeps its own cut.
        let mut short = side(vec![stream(1, 100, 100)], &[(true, 100), (false, 100)]);
        let before = short.clone();
        agree(Side::Client, &mut sender.clone(), &mut short);
        assert_eq!(short, before);
    }

    /// A peer's offset far from this side's own cut (review, issue 28: a
    /// sender claiming `u64::MAX` emptied the receiver's measured bytes)
    /// is ignored, and a peer's own interval bytes near `u64::MAX`
    /// saturate instead of overflowing.
    #[test]
    fn issue_28_a_peers_offset_far_from_the_own_cut_is_ignored() {
        let mut hostile = side(vec![stream(1, 0, u64::MAX)], &[(true, 1), (false, 0)]);
        let mut receiver = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        let before = receiver.clone();
        agree(Side::Server, &mut receiver, &mut hostile);
        assert_eq!(receiver, before);
        // The server sent 1000 bytes, 300 in its warm-up; the client's own
        // intervals are its numbers, the first measured one near u64::MAX.
        let mut server = side(vec![stream(1, 700, 300)], &[(true, 300), (false, 700)]);
        server.streams[0].sender = Some(Side::Server);
        let mut client = side(vec![stream(1, 750, 250)], &[(true, 250), (false, 750)]);
        client.streams[0].sender = Some(Side::Server);
        client.intervals[1].streams[0].bytes = u64::MAX;
        client.intervals[0].streams[0].bytes = 250;
        agree(Side::Server, &mut server, &mut client);
        assert_eq!(client.streams[0].omitted_bytes, 300);
        assert_eq!(per_interval(&client), [300, u64::MAX - 50]);
        client.intervals[0].streams[0].bytes = u64::MAX;
        client.streams[0].omitted_bytes = 250;
        client.streams[0].bytes = 750;
        agree(Side::Server, &mut server, &mut client);
        assert_eq!(per_interval(&client)[0], u64::MAX);
    }
}
