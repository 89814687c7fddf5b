//! The name of the network namespace this process runs in, so a command
//! printed for later (`doctor --apply`'s restore command) runs in the same
//! namespace: `ip netns exec NAME …`. Names are those `ip netns add` gives
//! (bind mounts under `/run/netns`), found by comparing device and inode
//! with `/proc/self/ns/net`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Where `ip netns` keeps its named namespaces.
const NAMED: &str = "/run/netns";

/// The name of this process's network namespace, when it is a named one
/// other than the initial namespace's.
pub fn current_name() -> Option<String> {
    let own = std::fs::metadata("/proc/self/ns/net").ok()?;
    let id = (own.dev(), own.ino());
    let init = std::fs::metadata("/proc/1/ns/net").ok();
    if init.is_some_and(|m| (m.dev(), m.ino()) == id) {
        return None;
    }
    name_in(Path::new(NAMED), id)
}

/// The entry of `dir` that is the namespace `(dev, ino)`.
fn name_in(dir: &Path, id: (u64, u64)) -> Option<String> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let m = std::fs::metadata(e.path()).ok()?;
        ((m.dev(), m.ino()) == id).then(|| e.file_name().to_string_lossy().into_owned())
    })
}

/// `command` as run in namespace `name` (quoted for sh where needed), or
/// unchanged without one.
pub fn wrap(command: String, name: Option<&str>) -> String {
    match name {
        None => command,
        Some(n) => format!("ip netns exec {} {command}", quote(n)),
    }
}

/// `s` as one sh word.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+@%:,/".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_28_restore_commands_name_the_namespace() {
        assert_eq!(wrap("sysctl -w a=1".into(), None), "sysctl -w a=1");
        assert_eq!(
            wrap("sysctl -w a=1".into(), Some("lab-a")),
            "ip netns exec lab-a sysctl -w a=1"
        );
        assert_eq!(
            wrap("x".into(), Some("it's $x")),
            r"ip netns exec 'it'\''s $x' x"
        );
    }
}
