#!/usr/bin/env python3
"""The library's import graph between its top-level modules (crate::X used in crate::Y, tests
and comments left out), and the circles in it. ARCHITECTURE.md draws the layers this checks.

    python3 scripts/import_layers.py          # the graph, then any circle
    python3 scripts/import_layers.py --check  # exit 1 if there is a circle (CI runs this)
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "hone", "src")


def graph(root):
    edges = {}
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)[:-3].split(os.sep)
            # Test code is left out: `tests.rs`, files under a `tests/` directory (a test
            # module split into files) and `*_tests.rs`.
            if rel == ["lib"] or "tests" in rel or rel[-1].endswith("_tests"):
                continue
            top = rel[0]
            src = open(path, encoding="utf-8").read()
            src = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", src, flags=re.S)
            src = re.sub(r"//[^\n]*", "", src)
            targets = edges.setdefault(top, set())
            for hit in re.finditer(r"crate::([a-z_0-9]+)", src):
                targets.add(hit.group(1))
            for hit in re.finditer(r"use crate::\{([^;]*)\};", src, flags=re.S):
                for part in re.split(r",\s*", hit.group(1)):
                    name = part.strip().split("::")[0]
                    if re.fullmatch(r"[a-z_0-9]+", name):
                        targets.add(name)
    return {m: {t for t in ts if t in edges and t != m} for m, ts in edges.items()}


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    edges = graph(ROOT)
    found = circles(edges)
    if "--check" not in sys.argv:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m])) or '(nothing)'}")
    for c in found:
        inner = "; ".join(f"{m} -> {', '.join(sorted(t for t in edges[m] if t in c))}" for m in c)
        print(f"import circle of {len(c)} modules: {inner}")
    if not found:
        print("no import circle between the library's modules")
    return 1 if found and "--check" in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
