//! How evenly flows shared a path: Jain's fairness index and the spread of
//! per-flow rates, for `--flows` tests.

/// Jain's fairness index of `rates`: (Σx)² ÷ (n · Σx²), 1 when every flow
/// got the same, 1/n when one flow got everything. R. Jain, D. Chiu and
/// W. Hawe, "A Quantitative Measure of Fairness and Discrimination for
/// Resource Allocation in Shared Computer Systems", DEC-TR-301, Digital
/// Equipment Corporation, 1984 (eq. 1). `None` for no flows or all zero.
pub fn jain_index(rates: &[f64]) -> Option<f64> {
    let n = rates.len() as f64;
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|x| x * x).sum();
    (n > 0.0 && squares > 0.0).then(|| sum * sum / (n * squares))
}

/// Least, median and greatest of `rates` (the median of an even count is
/// the mean of the middle two); `None` for none.
pub fn min_median_max(rates: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = rates.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    };
    Some((v[0], median, v[n - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_26_jain_index_is_one_when_even_and_one_over_n_when_one_takes_all() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain_index(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1+2+3)² / (3 · 14) = 36/42.
        let j = jain_index(&[1.0, 2.0, 3.0]).expect("some");
        assert!((j - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
    }

    #[test]
    fn spread_takes_the_middle_of_an_even_count() {
        assert_eq!(min_median_max(&[4.0, 1.0, 3.0, 2.0]), Some((1.0, 2.5, 4.0)));
        assert_eq!(min_median_max(&[7.0]), Some((7.0, 7.0, 7.0)));
        assert_eq!(min_median_max(&[]), None);
    }
}
