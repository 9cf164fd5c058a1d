#!/usr/bin/env python3
"""The product's includes point down only, and no file includes itself through others.

Packages, lowest first: bpf/ (the datapath; C++ may include only bpf/shaper_abi.h, the map
layout), core/ (the model), loader/ (the kernel side), then cli/ (people) and cni/ (runtimes),
which never include each other. Prints one line per fault and exits 1; nothing and 0 when the
tree keeps them. Usage: include-arrows.py [SOURCE_DIR]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
PACKAGES = ["bpf", "core", "loader", "cli", "cni"]
# What each package may include besides itself.
ALLOWED = {
    "bpf": {"vmlinux.h"},  # the kernel's types (CO-RE)
    "core": {"bpf/shaper_abi.h"},
    "loader": {"core", "bpf"},
    "cli": {"core", "loader", "bpf/shaper_abi.h"},
    "cni": {"core", "loader", "bpf/shaper_abi.h"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def product_files():
    for pkg in PACKAGES:
        for name in sorted(os.listdir(os.path.join(ROOT, pkg))):
            if name.endswith((".h", ".c", ".cpp")):
                yield f"{pkg}/{name}"


def resolve(including, target):
    """The repository path an include names: beside the file, then from the root, then bpf/ and
    cli/ (their include directories). None for generated and system headers."""
    for base in (os.path.dirname(including), "", "bpf", "cli"):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(ROOT, path)):
            return path
    return None


def allowed(pkg, path):
    other = path.split("/")[0]
    rules = ALLOWED[pkg]
    return other == pkg or other in rules or path in rules


def main():
    faults = []
    graph = {}
    for f in product_files():
        with open(os.path.join(ROOT, f), encoding="utf-8") as src:
            text = src.read()
        edges = []
        for target in INCLUDE.findall(text):
            path = resolve(f, target)
            if path is None:
                continue
            if not allowed(f.split("/")[0], path):
                faults.append(f"{f} includes {path}: an arrow that does not point down")
            edges.append(path)
        graph[f] = edges
    # A cycle: a file reached again from itself (depth-first, each cycle reported once).
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                faults.append("include cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for f in graph:
        if f not in state:
            visit(f)
    for line in faults:
        print(line)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
