//! linerate's numbers: unit parsing and formatting.
//!
//! Rates are SI (1 Gbit/s = 10^9 bit/s) everywhere, as the design requires,
//! and so are byte totals in human output (1 GB = 10^9 bytes), so that a
//! total and a rate printed side by side agree without a 1024 factor. Sizes
//! of buffers and byte limits given on the command line follow iperf3's
//! convention (`128K` = 131072 bytes) because that is what users type.
//!
//! [`histogram`] records durations in nanoseconds (HdrHistogram) and
//! summarises them as percentiles; [`fairness`] says how evenly many
//! flows shared a path.

pub mod fairness;
pub mod histogram;
pub mod trials;
pub mod units;
