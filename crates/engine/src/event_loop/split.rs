//! Spreading a side's flows over its loop threads.

use super::kind::LoopKind;

/// Deals `items` out to `threads` loops round-robin (flow `i` to loop
/// `i % threads`), so each direction's flows spread evenly; never more
/// loops than items, never an empty one.
pub fn split<T>(items: Vec<T>, threads: usize) -> Vec<Vec<T>> {
    let n = threads.clamp(1, items.len().max(1));
    let mut out: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % n].push(item);
    }
    out.retain(|v| !v.is_empty());
    out
}

/// How the report names loop `t` (from 0) of `flows` flows, waiting with
/// `kind`: its CPU figures (the busiest thread) are the loop's, not one
/// flow's.
pub fn label_of(kind: LoopKind, t: usize, flows: usize) -> String {
    format!(
        "event loop {} ({}, {flows} flow{})",
        t + 1,
        kind.name(),
        if flows == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deals_round_robin_without_empty_loops() {
        assert_eq!(
            split(vec![1, 2, 3, 4, 5], 2),
            vec![vec![1, 3, 5], vec![2, 4]]
        );
        assert_eq!(split(vec![1], 4), vec![vec![1]]);
        assert!(split(Vec::<u8>::new(), 2).is_empty());
    }
}
