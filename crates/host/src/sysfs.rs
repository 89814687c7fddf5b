//! Small readers for `/sys` and `/proc` files: one value per file, trimmed.
//! A file that is absent or unreadable (a driver that does not report it)
//! reads as `None`, never as a made-up default.

use std::path::Path;

/// The trimmed contents of `path`, or `None` if it cannot be read.
pub fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// `path` parsed as an integer.
pub fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read(path)?.parse().ok()
}

/// `path` parsed as a signed integer (e.g. `speed` is -1 when unknown).
pub fn read_i64(path: impl AsRef<Path>) -> Option<i64> {
    read(path)?.parse().ok()
}
