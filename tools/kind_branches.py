#!/usr/bin/env python3
"""Places outside tests that branch on the test kind or protocol (issue 24).

The test-type table (`linerate_proto::test_type`, `linerate_run::test_type`)
holds what varies by type of test; a branch on `spec::TestKind` or
`spec::Protocol` elsewhere is a place to ask whether it belongs there.
Counted: a match arm whose pattern names a variant, a comparison (`==`,
`!=`) with one, `matches!`, `if let`/`while let`, a pattern line of a
multi-line arm. Skipped: `#[cfg(test)]` items, tests/ and fuzz/ folders,
`tests.rs`, and iperf3's own JSON `Protocol` (crates/iperf3/src/json.rs).
A row is a place to look, not a verdict: the table's own lookup and each
entry's module branch on what they describe.

Usage: tools/kind_branches.py [-v]: the count per file (-v: every line),
from the files git tracks.
"""

import re
import subprocess
import sys

VARIANT = r"(?<![\w])(?:[\w:]*spec::)?(?:TestKind|Protocol)::(?:Stream|Rr|Crr|Msg|Tcp|Udp)\b"
BRANCH = [
    re.compile(VARIANT + r"[^=]*=>"),
    re.compile(r"(==|!=)\s*" + VARIANT + "|" + VARIANT + r"\s*(==|!=)"),
    re.compile(r"matches!\(.*" + VARIANT),
    re.compile(r"(if|while) let .*" + VARIANT + r".*="),
    re.compile(r"^\s*\|?\s*" + VARIANT + r"\s*(\||$)"),
]
# iperf3's JSON has a `Protocol` of its own.
SKIP = {"crates/iperf3/src/json.rs"}


def outside_tests(lines):
    """(line number, line) outside `#[cfg(test)]` items."""
    depth, skipping, pending = 0, False, False
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if skipping:
            depth += line.count("{") - line.count("}")
            skipping = depth > 0
        elif s.startswith("#[cfg(test)]"):
            pending = True
        elif pending and s.startswith("#["):
            pass
        elif pending:
            pending = False
            depth = line.count("{") - line.count("}")
            skipping = depth > 0
        else:
            yield n, line


def is_test_file(path):
    return (
        path.startswith(("tests/", "fuzz/"))
        or "/tests/" in path
        or "/fuzz" in path
        or path.endswith("tests.rs")
    )


def main():
    files = subprocess.run(
        ["git", "ls-files", "*.rs"], capture_output=True, text=True, check=True
    ).stdout.split()
    sites = {}
    for path in files:
        if is_test_file(path) or path in SKIP:
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for n, line in outside_tests(lines):
            code = line.split("//")[0]
            if any(r.search(code) for r in BRANCH):
                sites.setdefault(path, []).append((n, code.strip()))
    if "-v" in sys.argv:
        for path, rows in sites.items():
            for n, code in rows:
                print(f"{path}:{n}: {code}")
    print(f"{sum(map(len, sites.values()))} sites in {len(sites)} files")
    for path, rows in sorted(sites.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(rows):3} {path}")


if __name__ == "__main__":
    main()
