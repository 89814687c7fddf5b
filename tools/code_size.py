#!/usr/bin/env python3
"""Lines of logic per Rust source file, against a limit (issue 24).

A file over the limit holds more than one concept; a reader wants it split
(functions have their own limit: clippy's `too_many_lines` in Cargo.toml's
`[workspace.lints]`). Lines of logic are the non-blank lines left after
comments and doc comments are stripped (the lexer of `import_cycles.py`),
outside `#[cfg(test)]` modules; files that are only compiled for tests (a
`#[cfg(test)] mod x;` file, `tests.rs`, `*_tests.rs`) are not counted.

Usage: tools/code_size.py [--limit N] [ROOT]: prints the largest files and
exits 1 when one is over the limit (default 700).
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_cycles import crate_roots, strip_comments  # noqa: E402

LIMIT = 700


def test_only_files(root, src):
    """Files declared as `#[cfg(test)] mod name;` by a file of their crate."""
    out = set()
    for dirpath, _, files in os.walk(os.path.join(root, src)):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            text = strip_comments(open(path, encoding="utf-8").read())
            for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
                # `mod x;` in a/b.rs or a/mod.rs names a/b/x.rs or a/x.rs.
                base = dirpath if f in ("mod.rs", "lib.rs", "main.rs") else os.path.join(dirpath, f[:-3])
                for cand in (os.path.join(base, m.group(1) + ".rs"), os.path.join(base, m.group(1), "mod.rs")):
                    out.add(os.path.normpath(cand))
    return out


def logic_lines(text):
    """Non-blank lines of `text` (comments stripped) outside `#[cfg(test)]`
    inline modules."""
    count, depth, skip_at, prev = 0, 0, None, ""
    for line in strip_comments(text).split("\n"):
        if skip_at is None and re.match(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", line) and "cfg(test)" in prev:
            skip_at = depth
        if skip_at is None and line.strip() and not line.strip().startswith("#[cfg(test)]"):
            count += 1
        depth += line.count("{") - line.count("}")
        if skip_at is not None and depth <= skip_at:
            skip_at = None
        if line.strip():
            prev = line
    return count


def main():
    args = sys.argv[1:]
    limit = LIMIT
    if args[:1] == ["--limit"]:
        limit, args = int(args[1]), args[2:]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sizes = []
    for src in crate_roots(root):
        skip = test_only_files(root, src)
        for dirpath, _, files in os.walk(os.path.join(root, src)):
            for f in files:
                path = os.path.normpath(os.path.join(dirpath, f))
                if not f.endswith(".rs") or path in skip or f == "tests.rs" or f.endswith("_tests.rs"):
                    continue
                n = logic_lines(open(path, encoding="utf-8").read())
                sizes.append((n, os.path.relpath(path, root)))
    sizes.sort(reverse=True)
    over = [(n, p) for n, p in sizes if n > limit]
    for n, p in sizes[:5]:
        print(f"{n:5} {p}")
    print(f"{len(sizes)} files, largest {sizes[0][0] if sizes else 0} lines of logic, limit {limit}")
    for n, p in over:
        print(f"error: {p}: {n} lines of logic, over {limit}: split it by concept", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
