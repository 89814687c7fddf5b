//! File descriptors for many flows: each flow is a socket on each side,
//! and the default soft `RLIMIT_NOFILE` (often 1024) is below what
//! `--flows 1000` needs. The soft limit is raised up to the hard limit,
//! only when needed; beyond the hard limit the test is refused with the
//! number needed.

use crate::EngineError;

pub use linerate_proto::limits::SPARE_FDS;

/// Makes room for `needed` open descriptors: raises the soft
/// `RLIMIT_NOFILE` to the hard limit when it is lower than `needed`;
/// refuses, naming both numbers, when even the hard limit is lower.
pub fn ensure(needed: u64) -> Result<(), EngineError> {
    let lim = get()?;
    if lim.rlim_cur >= needed {
        return Ok(());
    }
    if lim.rlim_max < needed {
        return Err(EngineError::TooFewFds {
            needed,
            hard: lim.rlim_max,
        });
    }
    raise_to_hard().map(|_| ())
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (a server, which
/// cannot know its clients' flows in advance); returns the hard limit.
pub fn raise_to_hard() -> Result<u64, EngineError> {
    let mut lim = get()?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: raising the soft limit to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(EngineError::io(
                "raising RLIMIT_NOFILE",
                std::io::Error::last_os_error(),
            ));
        }
    }
    Ok(lim.rlim_max)
}

fn get() -> Result<libc::rlimit, EngineError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for the kernel to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(EngineError::io(
            "reading RLIMIT_NOFILE",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(lim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_26_more_descriptors_than_the_hard_limit_are_refused_with_the_number() {
        let e = ensure(u64::MAX - 1).expect_err("no hard limit is that high");
        let msg = e.to_string();
        assert!(msg.contains(&(u64::MAX - 1).to_string()), "{msg}");
        assert!(ensure(16).is_ok());
    }
}
