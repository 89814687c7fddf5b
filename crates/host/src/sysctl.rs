//! Sysctls by their dotted name, read from and written to `/proc/sys` of
//! the calling thread's namespaces (network sysctls are per network
//! namespace where the kernel makes them so; others are absent there).

use std::path::PathBuf;

/// Failure to change a sysctl.
#[derive(Debug, thiserror::Error)]
pub enum SysctlError {
    #[error("{0}: not a sysctl name")]
    BadName(String),
    #[error("{name}: cannot write {value:?}: {source}")]
    Write {
        name: String,
        value: String,
        source: std::io::Error,
    },
}

/// `/proc/sys/…` for a dotted name; refuses names that could leave /proc/sys.
pub fn path(name: &str) -> Result<PathBuf, SysctlError> {
    let ok = !name.is_empty()
        && name.split('.').all(|p| {
            !p.is_empty()
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !ok {
        return Err(SysctlError::BadName(name.to_owned()));
    }
    Ok(PathBuf::from("/proc/sys").join(name.replace('.', "/")))
}

/// The value with runs of whitespace (tabs in `tcp_rmem`) as single spaces.
pub fn read(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(path(name).ok()?).ok()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether this process may write the sysctl: some network sysctls are
/// visible but read-only in namespaces other than the initial one.
pub fn writable(name: &str) -> bool {
    let Ok(p) = path(name) else { return false };
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: access(2) reads a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Writes `value` (then reads it back: the kernel may clamp it).
pub fn write(name: &str, value: &str) -> Result<Option<String>, SysctlError> {
    let p = path(name)?;
    std::fs::write(&p, format!("{value}\n")).map_err(|source| SysctlError::Write {
        name: name.to_owned(),
        value: value.to_owned(),
        source,
    })?;
    Ok(read(name))
}

/// A `sysctl -w` command line setting every `(name, value)`, quoted for sh.
pub fn command(settings: &[(String, String)]) -> String {
    let mut cmd = String::from("sysctl -w");
    for (n, v) in settings {
        if v.contains(' ') {
            cmd.push_str(&format!(" {n}=\"{v}\""));
        } else {
            cmd.push_str(&format!(" {n}={v}"));
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_proc_sys_and_bad_names_are_refused() {
        assert_eq!(
            path("net.core.rmem_max").expect("ok"),
            PathBuf::from("/proc/sys/net/core/rmem_max")
        );
        for bad in ["", "net..core", "../etc", "net.core.x/y", "a b"] {
            assert!(path(bad).is_err(), "{bad}");
        }
        assert!(read("net.core.somaxconn").is_some());
        let tcp = read("net.ipv4.tcp_rmem").expect("tcp_rmem");
        assert_eq!(tcp.split(' ').count(), 3, "{tcp:?}");
        assert_eq!(
            command(&[("a.b".into(), "1 2 3".into()), ("c.d".into(), "4".into())]),
            "sysctl -w a.b=\"1 2 3\" c.d=4"
        );
    }
}
