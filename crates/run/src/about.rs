//! What this process says about itself in every report: its software
//! name and version, and the `LD_PRELOAD` it runs under; and, for iperf3's
//! output, the host it runs on.

/// What each side says it is running.
pub fn software() -> String {
    format!("linerate {}", env!("CARGO_PKG_VERSION"))
}

/// `uname -a`'s first fields, as iperf3's `system_info` (from
/// `/proc/sys/kernel`, which holds what uname(2) returns).
pub fn system_info() -> String {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned())
    };
    format!(
        "{} {} {} {} {}",
        read("ostype"),
        read("hostname"),
        read("osrelease"),
        read("version"),
        std::env::consts::ARCH
    )
}

/// This process's `LD_PRELOAD`, when set and not empty: every report
/// records it on both sides (issue 8), since a preloaded kernel-bypass
/// library changes what the figures measure. The dynamic loader ignores a
/// library it cannot load (with a line on stderr and nothing else), so
/// each one missing from this process's mappings is named as not loaded.
pub fn ld_preload() -> Option<String> {
    let v = std::env::var_os("LD_PRELOAD")?
        .to_string_lossy()
        .into_owned();
    if v.trim().is_empty() {
        return None;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let missing: Vec<&str> = v
        .split([' ', ':'])
        .filter(|lib| !lib.is_empty())
        .filter(|lib| {
            // A bare name is found on the library path: match the file name.
            let name = lib.rsplit('/').next().unwrap_or(lib);
            !maps
                .lines()
                .any(|l| l.ends_with(&format!("/{name}")) || l.ends_with(lib))
        })
        .collect();
    if missing.is_empty() || maps.is_empty() {
        return Some(v);
    }
    Some(format!("{v} (not loaded: {})", missing.join(", ")))
}
