//! Pointing the process's standard output and error at a file: iperf3's
//! `--logfile` on a server, where every line the server prints (reports
//! and log lines alike) goes to the file, as with iperf3.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Makes file descriptors 1 and 2 refer to `file` (which may then be
/// dropped: the duplicates keep it open).
pub fn redirect_to(file: &File) -> std::io::Result<()> {
    for target in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 on a descriptor `file` owns and a standard one; no
        // memory is involved, and Rust's stdout/stderr keep using fds 1
        // and 2, which now refer to the file.
        if unsafe { libc::dup2(file.as_raw_fd(), target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
