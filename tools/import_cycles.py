#!/usr/bin/env python3
"""Import circles between files of one folder (issue 24 §6).

A file should import only from its own level or below: two files of one
folder that import from each other (directly or round a longer loop) are a
circle, and the shared items belong in a leaf module both import.

Rust: every crate under src/ and crates/*/src/ (and fuzz/, tests/). A file
imports another when one of its `use` trees or a path in its code
(`crate::…`, `super::…`, `self::…`, or a child module's name) resolves into
the other file's module; `mod.rs` (or `lib.rs`/`main.rs`) is in the same
folder as its child files, so a child using its parent's items while the
parent uses the child's is a circle too. Inline modules are followed for
`super`; `#[cfg(test)]` modules are left out (tests are not the layering). Python: bench/ packages (`from .x import`,
`from pkg.x import`, `import pkg.x`).

Two kinds are told apart. A circle between sibling files (neither of them
the folder's `mod.rs`/`lib.rs`/`main.rs`/`__init__.py`) is an error: the
script prints it with the names that make its edges and exits 1. A circle
through the parent file (the parent re-exports a child's items while the
child uses the parent's) is Rust's usual module layout; it is listed with
`--strict` (which also fails on it), counted otherwise.
Usage: tools/import_cycles.py [--strict] [ROOT] (default: the repository root).
"""

import os
import re
import sys
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments(text):
    """Rust source without comments, string and char literals (a small
    lexer: a quote inside a comment must not swallow the code after it)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12]):
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def crate_roots(root):
    roots = []
    for base in ["src"] + [os.path.join("crates", c, "src") for c in sorted(os.listdir(os.path.join(root, "crates")))]:
        if os.path.isdir(os.path.join(root, base)):
            roots.append(base)
    return roots


def rust_modules(root, src):
    """Module path (tuple) -> file, for one crate's src folder."""
    mods = {}
    for dirpath, _, files in os.walk(os.path.join(root, src)):
        rel = os.path.relpath(dirpath, os.path.join(root, src))
        parts = () if rel == "." else tuple(rel.split(os.sep))
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            if not parts and f in ("lib.rs", "main.rs"):
                mods.setdefault((), path)
            elif f == "mod.rs":
                mods[parts] = path
            else:
                mods[parts + (f[:-3],)] = path
    return mods


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, t):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(t):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(t[start:i])
                start = i + 1
        items.append(t[start:])
        for it in items:
            if not it:
                continue
            m = re.match(r"^(.*?)::\{(.*)\}$", it)
            if m:
                walk(prefix + m.group(1) + "::", m.group(2))
            elif it.startswith("{") and it.endswith("}"):
                walk(prefix, it[1:-1])
            else:
                out.append(prefix + it)

    walk("", tree)
    return out


def resolve(mods, here, segs):
    """The module (tuple) a path's segments lead into, from module `here`."""
    if not segs:
        return None
    if segs[0] == "crate":
        cur, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        cur = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                if not cur:
                    return None
                cur = cur[:-1]
            segs = segs[1:]
    elif here + (segs[0],) in mods:
        cur = here
    else:
        return None
    for s in segs:
        if cur + (s,) in mods:
            cur = cur + (s,)
        else:
            break
    return cur


def rust_edges(root):
    edges = defaultdict(lambda: defaultdict(set))
    for src in crate_roots(root):
        mods = rust_modules(root, src)
        for mod, path in mods.items():
            text = strip_comments(open(path, encoding="utf-8").read())
            # Inline modules: track them so `super` inside resolves right.
            # A `#[cfg(test)]` module is skipped: a test may use a module
            # above its file's level (a spec test calling negotiate) without
            # making the code a circle.
            stack, depth, lines_mods, prev = [], 0, [], ""
            for line in text.split("\n"):
                m = re.match(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*\{", line)
                if m:
                    stack.append((m.group(1), depth, "cfg(test)" in prev))
                cur = mod + tuple(n for n, _, _ in stack)
                if not any(t for _, _, t in stack):
                    lines_mods.append((cur, line))
                depth += line.count("{") - line.count("}")
                while stack and depth <= stack[-1][1]:
                    stack.pop()
                if line.strip():
                    prev = line
            # `use` statements may span lines: collect per inline module.
            chunks = defaultdict(list)
            for cur, line in lines_mods:
                chunks[cur].append(line)
            for cur, lines in chunks.items():
                body = "\n".join(lines)
                paths = []
                for u in re.finditer(r"\buse\s+([^;]+);", body):
                    paths += expand_use(u.group(1))
                paths += re.findall(r"\b(?:crate|super|self|" + IDENT + r")(?:::" + IDENT + r")+", body)
                for p in paths:
                    segs = [s for s in p.split("::") if s and s != "*"]
                    target = resolve(mods, cur, segs)
                    if target is None or target not in mods:
                        continue
                    tpath = mods[target]
                    if tpath != path and os.path.dirname(tpath) == os.path.dirname(path):
                        name = segs[-1] if len(segs) > 1 else p
                        edges[path][tpath].add(name)
    return edges


def python_edges(root):
    edges = defaultdict(lambda: defaultdict(set))
    for dirpath, _, files in os.walk(os.path.join(root, "bench")):
        pkg = os.path.basename(dirpath)
        names = {f[:-3] for f in files if f.endswith(".py")}
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            for line in open(path, encoding="utf-8"):
                targets = []
                m = re.match(r"^\s*from\s+(\.|" + re.escape(pkg) + r"\.?)(\w*)\s+import\s+(.*)", line)
                if m:
                    if m.group(2):
                        targets.append((m.group(2), m.group(3).strip()))
                    else:
                        targets += [(n.strip().split(" ")[0], n.strip()) for n in m.group(3).split(",")]
                m = re.match(r"^\s*import\s+" + re.escape(pkg) + r"\.(\w+)", line)
                if m:
                    targets.append((m.group(1), m.group(1)))
                for mod, what in targets:
                    if mod in names and mod + ".py" != f:
                        edges[path][os.path.join(dirpath, mod + ".py")].add(what)
    return edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    nodes = set(edges) | {t for e in edges.values() for t in e}

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


PARENTS = ("mod.rs", "lib.rs", "main.rs", "__init__.py")


def siblings_only(edges):
    """The edges between files none of which is its folder's parent file."""
    out = defaultdict(lambda: defaultdict(set))
    for a, targets in edges.items():
        for b, names in targets.items():
            if os.path.basename(a) not in PARENTS and os.path.basename(b) not in PARENTS:
                out[a][b] = names
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--strict"]
    strict = len(args) < len(sys.argv) - 1
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    found = 0
    through_parent = 0
    for all_edges in (rust_edges(root), python_edges(root)):
        edges = siblings_only(all_edges)
        sibling = cycles(edges)
        parent = [c for c in cycles(all_edges) if not any(set(s) <= set(c) and len(s) == len(c) for s in sibling)]
        through_parent += len(parent)
        if strict:
            sibling, edges = sibling + parent, all_edges
        for comp in sibling:
            found += 1
            print("circle: " + ", ".join(os.path.relpath(c, root) for c in comp))
            for a in comp:
                for b in comp:
                    if b in edges.get(a, {}):
                        names = sorted(edges[a][b])
                        more = f" (+{len(names) - 6})" if len(names) > 6 else ""
                        print(f"  {os.path.relpath(a, root)} -> {os.path.relpath(b, root)}: {', '.join(names[:6])}{more}")
    print(f"{found} circle(s){' (strict)' if strict else ' between sibling files'}; "
          f"{through_parent} through a parent file (mod.rs/lib.rs/__init__.py), listed with --strict")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
