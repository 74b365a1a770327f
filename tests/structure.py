#!/usr/bin/env python3
"""tests/structure.py - the structure checks of docs/structure.md, run by
`make unit`, measured from the objects themselves (each library source
compiled alone, nm for who uses whose symbols):

  exports   the library's exported symbols with their versions equal
            tests/exports.txt (a change to the exported interface is a
            decision: regenerate with --write-exports and commit it)
  self      no library object below the hooks (every object but
            shim/hooks_*.o) calls one of our own exports: it must call
            kp_real (or an injected op), else it re-enters our wrappers
            (getpeername under a connection's lock could deadlock)
  cycle     the files that form cycles (strongly connected components of
            more than one file) are no more, and no others, than
            tests/structure.txt records; when they shrink, the check
            says so (record the smaller set: --write-cycle)

usage: structure.py LIB OBJDIR [--write-exports] [--write-cycle]
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTS = os.path.join(ROOT, "tests", "exports.txt")
CYCLE = os.path.join(ROOT, "tests", "structure.txt")


def nm(args):
    out = subprocess.run(["nm"] + args, check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def exports(lib):
    """name@@VERSION (or name) of every exported function or object"""
    names = set()
    for f in nm(["-D", "--defined-only", "--with-symbol-versions", lib]):
        if len(f) >= 3 and f[1] != "A":
            names.add(f[2])
    return sorted(names)


def objects(objdir):
    """{file: (defined globals, undefined symbols)} for every object"""
    res = {}
    paths = sorted(os.path.join(d, n) for d, _, ns in os.walk(objdir) for n in ns if n.endswith(".o"))
    for path in paths:
        name = os.path.basename(path)
        defined, undef = set(), set()
        for f in nm([path]):
            if len(f) == 2 and f[0] == "U":
                undef.add(f[1])
            elif len(f) == 3 and f[1] in "TDBRVWCG" and f[1].isupper():
                defined.add(f[2])
        res[name[:-2]] = (defined, undef)
    return res


def sccs(graph):
    """Tarjan's strongly connected components, each a sorted list"""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lib, objdir = args
    failed = False

    # exports
    got = exports(lib)
    if "--write-exports" in flags:
        with open(EXPORTS, "w") as f:
            f.write("".join(n + "\n" for n in got))
    with open(EXPORTS) as f:
        want = [line.strip() for line in f if line.strip()]
    if got != want:
        failed = True
        print("exports: the library's exported symbols differ from tests/exports.txt:")
        for n in sorted(set(want) - set(got)):
            print("  gone:  " + n)
        for n in sorted(set(got) - set(want)):
            print("  new:   " + n)
    else:
        print("exports: %d symbols, as tests/exports.txt" % len(got))

    # self-calls
    ours = {n.split("@")[0] for n in got}
    objs = objects(objdir)
    selfcalls = []
    for name, (_, undef) in objs.items():
        if name.startswith("hooks_"):
            continue  # the wrappers' layer: one wrapper may call another
        for s in sorted(undef & ours):
            selfcalls.append("%s.o calls our own %s" % (name, s))
    if selfcalls:
        failed = True
        print("self: library objects call our own exports instead of kp_real:")
        for s in selfcalls:
            print("  " + s)
    else:
        print("self: no object below the hooks calls one of our exports")

    # cycles
    owner = {}
    for name, (defined, _) in objs.items():
        for s in defined:
            owner.setdefault(s, name)
    graph = {name: set() for name in objs}
    for name, (_, undef) in objs.items():
        for s in undef:
            o = owner.get(s)
            if o and o != name:
                graph[name].add(o)
    cyc = sorted(f for comp in sccs(graph) if len(comp) > 1 for f in comp)
    line = "cycle %d: %s" % (len(cyc), " ".join(cyc))
    if "--write-cycle" in flags:
        with open(CYCLE, "w") as f:
            f.write(line + "\n")
    with open(CYCLE) as f:
        rec = f.read().split(":", 1)[1].split()
    grown = sorted(set(cyc) - set(rec))
    if grown:
        failed = True
        print("cycle: files joined the cycle recorded in tests/structure.txt: " + " ".join(grown))
        print("  now " + line)
    elif len(cyc) < len(rec):
        print("cycle: smaller than recorded (%d < %d): record it with --write-cycle" % (len(cyc), len(rec)))
        print("  now " + line)
    else:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
