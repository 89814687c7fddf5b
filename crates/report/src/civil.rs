//! UTC calendar dates from Unix time, for captions, reports and iperf3's
//! `timestamp.time`: one implementation of the day-to-date conversion.

/// The proleptic Gregorian date `(year, month 1–12, day 1–31)` of `days`
/// since 1970-01-01: H. Hinnant, "chrono-Compatible Low-Level Date
/// Algorithms", `civil_from_days`
/// (<https://howardhinnant.github.io/date_algorithms.html#civil_from_days>).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

/// `secs` since the Unix epoch as `(date, seconds into that day)`.
pub fn split_secs(secs: i64) -> ((i64, u32, u32), i64) {
    (
        civil_from_days(secs.div_euclid(86_400)),
        secs.rem_euclid(86_400),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_across_eras_and_leap_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(split_secs(1_795_437_358), ((2026, 11, 23), 45_358));
    }
}
