//! Statistics over repeated trials of one measurement: mean, sample
//! standard deviation, min, max and a 95% confidence interval.
//!
//! Every figure linerate repeats (rates, times, counts, percentages) cannot
//! be negative, and a few trials of a noisy one spread widely: the normal
//! interval mean ± t · s / √n then reached below zero (issue 28: a
//! throughput CI of −51.47 … 85.22 Gbit/s, a jitter CI of −19 … 334 ns).
//! So the interval is taken on the log scale when every value is positive:
//! m ± t · s / √n over the logarithms, back-transformed, exp(m ± …), a 95%
//! interval of the geometric mean, positive and asymmetric as such spreads
//! are (Bland and Altman, "Transformations, means, and confidence
//! intervals", BMJ 1996;312:1079,
//! <https://doi.org/10.1136/bmj.312.7038.1079>). Where a value is zero
//! (the log does not exist) the normal interval is used with its low end
//! cut at zero. t is the 0.975 quantile of Student's t distribution with
//! n − 1 degrees of freedom. The quantiles are the table of the
//! NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2
//! "Critical Values of the Student's t Distribution"
//! (<https://www.itl.nist.gov/div898/handbook/eda/section3/eda3672.htm>),
//! column 0.975 (two-sided 95%), rounded to three decimals there. Degrees
//! of freedom between table rows use the next smaller row, which widens the
//! interval slightly rather than narrowing it.

use serde::{Deserialize, Serialize};

/// (degrees of freedom, t₀.₉₇₅) from the NIST table cited above.
const T_975: &[(u32, f64)] = &[
    (1, 12.706),
    (2, 4.303),
    (3, 3.182),
    (4, 2.776),
    (5, 2.571),
    (6, 2.447),
    (7, 2.365),
    (8, 2.306),
    (9, 2.262),
    (10, 2.228),
    (11, 2.201),
    (12, 2.179),
    (13, 2.160),
    (14, 2.145),
    (15, 2.131),
    (16, 2.120),
    (17, 2.110),
    (18, 2.101),
    (19, 2.093),
    (20, 2.086),
    (21, 2.080),
    (22, 2.074),
    (23, 2.069),
    (24, 2.064),
    (25, 2.060),
    (26, 2.056),
    (27, 2.052),
    (28, 2.048),
    (29, 2.045),
    (30, 2.042),
    (40, 2.021),
    (50, 2.009),
    (60, 2.000),
    (80, 1.990),
    (100, 1.984),
];

/// The normal quantile, the limit of t as the degrees of freedom grow.
const Z_975: f64 = 1.960;

/// t₀.₉₇₅ for `df` degrees of freedom (≥ 1).
pub fn t_975(df: u32) -> f64 {
    if df > 100 {
        // Beyond the table's last row the quantile is within 0.02 of z;
        // the 100-row value stays conservative up to df = 1000.
        return if df > 1000 { Z_975 } else { 1.984 };
    }
    T_975
        .iter()
        .rev()
        .find(|(d, _)| *d <= df)
        .map_or(T_975[0].1, |(_, t)| *t)
}

/// Summary of one figure over n trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrialStats {
    pub n: u32,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); 0 for n = 1.
    pub sd: f64,
    pub min: f64,
    pub max: f64,
    /// 95% confidence interval (absent for n < 2): of the geometric mean
    /// when every value is positive, else of the mean, cut at zero (see
    /// the module's notes); never below zero for values that are not.
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
}

impl TrialStats {
    /// The statistics of `values`, a quantity that cannot be negative;
    /// `None` when empty or not all finite.
    pub fn of(values: &[f64]) -> Option<TrialStats> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = values.len();
        let (mean, sd) = mean_sd(values);
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let ci = (n > 1).then(|| {
            if min > 0.0 {
                let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
                let (m, s) = mean_sd(&logs);
                let half = t_975((n - 1) as u32) * s / (n as f64).sqrt();
                ((m - half).exp(), (m + half).exp())
            } else {
                let half = t_975((n - 1) as u32) * sd / (n as f64).sqrt();
                ((mean - half).max(0.0), mean + half)
            }
        });
        Some(TrialStats {
            n: n as u32,
            mean,
            sd,
            min,
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ci95_low: ci.map(|c| c.0),
            ci95_high: ci.map(|c| c.1),
        })
    }
}

/// Mean and sample standard deviation (0 for one value) of `v` (not empty).
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    (mean, sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// Recorded trial values (receiver Gbit/s of five 1-second loopback TCP
    /// tests) against a reference computed independently with Python:
    /// `statistics.mean`, `statistics.stdev` and `scipy.stats.t.ppf(0.975, 4)`
    /// = 2.7764451051977987 (the table's 2.776).
    #[test]
    fn recorded_trials_match_the_reference_computation() {
        let v = [17.56, 16.98, 18.02, 17.31, 16.75];
        let s = TrialStats::of(&v).expect("stats");
        assert_eq!(s.n, 5);
        assert!(close(s.mean, 17.324), "{s:?}");
        // Python: statistics.stdev(v) = 0.4970211263115479.
        assert!(close(s.sd, 0.4970211263115479), "{s:?}");
        assert_eq!((s.min, s.max), (16.75, 18.02));
        let half = 2.776 * s.sd / 5f64.sqrt();
        // The interval is the log scale's: Python, with l = [math.log(x) for
        // x in v], math.exp(statistics.mean(l) ∓ 2.776 *
        // statistics.stdev(l) / math.sqrt(5)) = 16.7142… and 17.9443….
        let (lo, hi) = (s.ci95_low.expect("ci"), s.ci95_high.expect("ci"));
        assert!(
            (lo - 16.7142).abs() < 1e-3 && (hi - 17.9443).abs() < 1e-3,
            "{lo} {hi}"
        );
        // The reference half-width with scipy's exact quantile is
        // 0.6171332388877357; the table's rounding keeps us within 0.02%.
        assert!((half - 0.6171332388877357).abs() / half < 2e-4, "{half}");
    }

    #[test]
    fn edge_cases() {
        assert_eq!(TrialStats::of(&[]), None);
        assert_eq!(TrialStats::of(&[1.0, f64::NAN]), None);
        let one = TrialStats::of(&[3.0]).expect("one");
        assert_eq!((one.mean, one.sd, one.ci95_low), (3.0, 0.0, None));
        let same = TrialStats::of(&[2.0; 10]).expect("same");
        assert_eq!(same.sd, 0.0);
        assert!(close(same.ci95_low.expect("ci"), 2.0));
        assert!(close(same.ci95_high.expect("ci"), 2.0));
    }

    /// Issue 28: three trials spread widely (the README's msg example's
    /// 56 B shm-bulk rates; a `--repeat` jitter) gave intervals below
    /// zero; a positive quantity's interval is now positive and contains
    /// its geometric mean, and a zero among the values cuts the normal
    /// interval at zero.
    #[test]
    fn issue_28_intervals_of_positive_quantities_never_go_below_zero() {
        for v in [
            &[1.2e6, 107.9e6, 3.9e6][..],
            &[19.0, 161.0, 250.0, 12.0],
            &[0.4e9, 85.0e9, 2.0e9],
        ] {
            let s = TrialStats::of(v).expect("stats");
            let (lo, hi) = (s.ci95_low.expect("ci"), s.ci95_high.expect("ci"));
            let gm = (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
            assert!(lo > 0.0 && lo < gm && gm < hi, "{v:?}: {lo} … {hi}");
            // The normal interval went below zero for every one of these.
            assert!(s.mean - t_975(s.n - 1) * s.sd / f64::from(s.n).sqrt() < 0.0);
        }
        let z = TrialStats::of(&[0.0, 10.0, 200.0]).expect("stats");
        assert_eq!(z.ci95_low, Some(0.0));
        assert!(z.ci95_high.expect("ci") > 200.0);
    }

    #[test]
    fn t_quantiles_follow_the_table() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(9), 2.262);
        assert_eq!(t_975(30), 2.042);
        assert_eq!(t_975(35), 2.042, "between rows: the smaller df, wider");
        assert_eq!(t_975(100), 1.984);
        assert_eq!(t_975(100_000), 1.960);
        // Monotone: more trials never widen the interval.
        let mut prev = f64::INFINITY;
        for df in 1..2000 {
            assert!(t_975(df) <= prev);
            prev = t_975(df);
        }
    }
}
