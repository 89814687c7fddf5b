//! Test-only hooks the end-to-end tests reach through the environment:
//! they change what this process may do, never what it measures.

/// `LINERATE_TEST_DENY_IO_URING`: when set, [`install`] forbids
/// `io_uring_setup` to this process with a seccomp filter (`EPERM`), as a
/// container runtime's policy would, so tests can check the refusal and
/// `auto`'s fallback without touching the host's sysctl.
pub const DENY_IO_URING: &str = "LINERATE_TEST_DENY_IO_URING";

/// Installs the hooks the environment asks for. Call first thing in
/// `main`, before any thread starts (a filter covers the calling thread
/// and those it starts later).
pub fn install() -> std::io::Result<()> {
    if std::env::var_os(DENY_IO_URING).is_some() {
        deny_io_uring()?;
    }
    Ok(())
}

fn deny_io_uring() -> std::io::Result<()> {
    // Classic BPF over `struct seccomp_data` (nr at offset 0): io_uring_setup
    // returns EPERM, everything else is allowed. The syscall number is the
    // same (425) on every architecture linerate builds for.
    const RET_ERRNO: u32 = 0x0005_0000; // SECCOMP_RET_ERRNO
    const RET_ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let nr = libc::SYS_io_uring_setup as u32;
    let mut prog = [
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: nr,
        },
        stmt(libc::BPF_RET | libc::BPF_K, RET_ERRNO | libc::EPERM as u32),
        stmt(libc::BPF_RET | libc::BPF_K, RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: prctl with plain integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fprog points at a filter program that lives across the call
    // (the kernel copies it).
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
