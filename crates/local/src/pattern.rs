//! The integrity pattern of `--verify`: every byte of message n at offset
//! o is a function of (n, o), so a receiver checks a message knowing only
//! its number, and a byte moved, lost, duplicated or taken from another
//! message shows.
//!
//! Bytes come from 8-byte words: word w of message n is SplitMix64 of
//! (n · φ64 + w), little-endian; byte o is byte o mod 8 of word o / 8. One
//! word per 8 bytes keeps filling and checking at memory speed.

/// Fills `buf` with message `n`'s pattern.
pub fn fill(n: u64, buf: &mut [u8]) {
    let mut chunks = buf.chunks_exact_mut(8);
    let mut w = 0u64;
    for c in &mut chunks {
        c.copy_from_slice(&word(n, w).to_le_bytes());
        w += 1;
    }
    let rest = chunks.into_remainder();
    let last = word(n, w).to_le_bytes();
    rest.copy_from_slice(&last[..rest.len()]);
}

/// Whether `buf` holds message `n`'s pattern, every byte of it.
pub fn check(n: u64, buf: &[u8]) -> bool {
    let mut chunks = buf.chunks_exact(8);
    let mut w = 0u64;
    for c in &mut chunks {
        if c != word(n, w).to_le_bytes() {
            return false;
        }
        w += 1;
    }
    let rest = chunks.remainder();
    rest == &word(n, w).to_le_bytes()[..rest.len()]
}

fn word(n: u64, w: u64) -> u64 {
    // SplitMix64's finaliser (Steele, Lea, Flood 2014).
    let mut z = n
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(w)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_single_byte_change_is_caught(n in any::<u64>(), len in 1usize..300, at in any::<usize>(), flip in 1u8..=255) {
            let mut b = vec![0; len];
            fill(n, &mut b);
            prop_assert!(check(n, &b));
            b[at % len] ^= flip;
            prop_assert!(!check(n, &b));
        }

        #[test]
        fn another_message_number_does_not_match(n in any::<u64>(), len in 8usize..100) {
            let mut b = vec![0; len];
            fill(n, &mut b);
            prop_assert!(!check(n.wrapping_add(1), &b));
        }
    }
}
