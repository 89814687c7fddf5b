//! Compiles the XDP program (`bpf/redirect.c`) with clang's BPF target into
//! `$OUT_DIR/redirect.o`, which `src/program.rs` embeds. No prebuilt object
//! is committed: the build needs clang (Debian: `apt-get install clang`; or
//! name one with `CLANG=/path/to/clang`).

use std::path::PathBuf;
use std::process::{exit, Command};

fn main() {
    let src = "bpf/redirect.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        eprintln!("OUT_DIR is not set: build.rs runs under cargo");
        exit(1);
    };
    let out = PathBuf::from(out_dir).join("redirect.o");
    let status = Command::new(&clang)
        .args([
            "-O2", "-g", "-target", "bpf", "-Wall", "-Werror", "-c", src, "-o",
        ])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("error: `{clang}` could not compile {src} to BPF ({s})");
            exit(1);
        }
        Err(e) => {
            eprintln!(
                "error: linerate-xdp compiles its XDP program with clang's BPF target, \
                 and `{clang}` could not be run ({e}). Install clang (Debian/Ubuntu: \
                 `apt-get install clang`) or set CLANG to its path."
            );
            exit(1);
        }
    }
}
