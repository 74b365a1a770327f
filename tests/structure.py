#!/usr/bin/env python3
"""tests/structure.py - the structure checks of docs/structure.md, run by
`make unit`, measured from the objects themselves (each library source
compiled alone, nm for who uses whose symbols):

  exports   the library's exported symbols with their versions equal
            tests/exports.txt (a change to the exported interface is a
            decision: regenerate with --write-exports and commit it)
  aliases   every public name libc.so.6 gives a function the library
            wraps is exported by the library too (shim/alias.h)
  self      no library object below the hooks (every object but
            shim/hooks_*.o) calls one of our own exports: it must call
            kp_real (or an injected op), else it re-enters our wrappers
            (getpeername under a connection's lock could deadlock)
  cycle     the files that form cycles (strongly connected components of
            more than one file) are no more, and no others, than
            tests/structure.txt records; when they shrink, the check
            says so (record the smaller set: --write-cycle)
  direction every call goes down the module map (ORDER below, the map of
            docs/structure.md): a file calls only files after it; the
            wrappers (hooks_*) call one another, and nothing else calls
            them; a library file missing from the map fails
  pure      the pure modules (PURE) use no libc name beyond PURE_LIBC:
            no system call, no exit
  size      no library source over MAX_FILE_LINES lines, no function over
            MAX_FUNC_LINES outside the framer's parsers (LONG_OK)

usage: structure.py LIB OBJDIR [--write-exports] [--write-cycle]
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTS = os.path.join(ROOT, "tests", "exports.txt")
CYCLE = os.path.join(ROOT, "tests", "structure.txt")

# the module map of docs/structure.md, top to bottom: a file calls only
# files after it (a layer per line)
ORDER = """
hooks_*
tls_calls send conn_opts conn_peek conn_sandbox conn_cred
conn
conn_held
conn_replay conn_child
wire
hidden
tls_held
tls_across tls_answer tls_handout tls_goodbye tls_engine tls_conf tls_capture tls_import tls_peer tls_own
broker_client watch sockopts aio_scan tls_real
sigwait config fdlimit fdtable tcpinfo elf_scan wbuf real dl_real broker_check
tls_foreign
framer replay pool broker_proto tls_export der elf_sym
kp_mem tls_record
""".split()
PURE = {"framer", "replay", "pool", "broker_proto", "tls_record", "tls_export", "tls_foreign", "der", "elf_sym"}
# what the pure modules may use of libc: memory and strings, no system call
PURE_LIBC = {"memchr", "memcmp", "memcpy", "memmove", "memset", "strncasecmp", "strlen", "strcmp",
             "strncmp", "qsort", "__assert_fail", "_GLOBAL_OFFSET_TABLE_"}
# (the record layer, the export message and the foreign engine reach
# libcrypto's computation through a table, shim/tls_crypto.h: no libcrypto
# name of their own either)
PURE_CRYPTO = {}
MAX_FILE_LINES = 1700
MAX_FUNC_LINES = 120
LONG_OK = {"frm_resp_feed", "frm_req_parse_head", "body_run"}  # fuzzed parsers


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


def libc_aliases_missing(ours):
    """(our name, libc's other name) for each function we export whose
    address in libc.so.6 carries a public name (not GLIBC_PRIVATE) we do
    not export: a program may bind that name, and it goes past us
    (shim/alias.h).  None when no libc.so.6 is found."""
    libc = None
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        if os.path.exists(os.path.join(d, "libc.so.6")):
            libc = os.path.join(d, "libc.so.6")
            break
    if not libc:
        return None
    by_addr, addr_of = {}, {}
    for f in nm(["-D", "--defined-only", "--with-symbol-versions", libc]):
        if len(f) < 3 or f[1] not in ("T", "W", "i"):
            continue
        name, _, version = f[2].partition("@")
        if version.lstrip("@") == "GLIBC_PRIVATE":
            continue
        by_addr.setdefault(f[0], set()).add(name)
        addr_of.setdefault(name, set()).add(f[0])
    missing = set()
    for n in ours:
        for a in addr_of.get(n, ()):
            for other in by_addr[a] - ours:
                missing.add((n, other))
    return sorted(missing)


def objects(objdir):
    """{file: (defined globals, undefined symbols, weak ones included)} for
    the object of every library source (shim/*.c, pool/*.c but the
    broker's main), keyed by file name (two sources of one name fail)"""
    res = {}
    for d in ("shim", "pool"):
        for n in sorted(os.listdir(os.path.join(ROOT, d))):
            if not n.endswith(".c") or (d, n) == ("pool", "broker.c"):
                continue
            name = n[:-2]
            if name in res:
                raise SystemExit("structure: two library sources named %s.c" % name)
            path = os.path.join(objdir, d, name + ".o")
            defined, undef = set(), set()
            for f in nm([path]):
                if len(f) == 2 and f[0] in "Uwv":
                    undef.add(f[1])
                elif len(f) == 3 and f[1] in "TDBRVWCG" and f[1].isupper():
                    defined.add(f[2])
            res[name] = (defined, undef)
    return res


def rank(name):
    key = "hooks_*" if name.startswith("hooks_") else name
    return ORDER.index(key) if key in ORDER else None


def functions(path):
    """(lines, name) of every function defined in a C source: from the line
    its definition starts to its closing brace"""
    lines = open(path).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^[A-Za-z_][^;(]*?\b(\w+)\s*\(", lines[i])
        if m and not lines[i].startswith(("typedef", "#")) and not lines[i].rstrip().endswith(";"):
            j = i
            while j < len(lines) and not lines[j].startswith("{") and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].startswith("{"):
                k = j
                while k < len(lines) and lines[k] != "}":
                    k += 1
                out.append((k - i + 1, m.group(1)))
                i = k
        i += 1
    return out


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

    # aliases
    ours = {n.split("@")[0] for n in got}
    missing = libc_aliases_missing(ours)
    if missing is None:
        print("aliases: no libc.so.6 found to compare with")
    elif missing:
        failed = True
        print("aliases: libc exports these functions we wrap under names the library does not:")
        for n, a in missing:
            print("  %s (libc's %s): a program binding it goes past the library" % (a, n))
    else:
        print("aliases: every public name libc gives a function we wrap is ours too")

    # self-calls
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

    up = []
    for name, targets in sorted(graph.items()):
        for t in sorted(targets):
            rn, rt = rank(name), rank(t)
            if rn is None or rt is None:
                up.append("%s is not in the module map (tests/structure.py ORDER)" % (t if rn is not None else name))
            elif not (name.startswith("hooks_") and t.startswith("hooks_")) and rn >= rt:
                up.append("%s.o calls %s.o, which is not below it: %s" % (
                    name, t, " ".join(sorted(s for s in objs[name][1] if owner.get(s) == t))))
    if up:
        failed = True
        print("direction: calls that do not go down the module map:")
        for u in sorted(set(up)):
            print("  " + u)
    else:
        print("direction: every call goes down the module map")

    impure = []
    for name in sorted(PURE):
        for s in sorted(objs[name][1]):
            if s not in owner and s not in PURE_LIBC and not s.startswith(PURE_CRYPTO.get(name, ())):
                impure.append("%s.o uses %s" % (name, s))
    if impure:
        failed = True
        print("pure: the pure modules use libc names beyond memory and strings:")
        for u in impure:
            print("  " + u)
    else:
        print("pure: %s use memory and string functions only%s" % (
            ", ".join(sorted(PURE)),
            " (%s libcrypto's computation too)" % ", ".join(sorted(PURE_CRYPTO)) if PURE_CRYPTO else ""))

    big = []
    for d in ("shim", "pool"):
        for n in sorted(os.listdir(os.path.join(ROOT, d))):
            if not n.endswith(".c"):
                continue
            path = os.path.join(ROOT, d, n)
            nlines = sum(1 for _ in open(path))
            if nlines > MAX_FILE_LINES:
                big.append("%s/%s: %d lines" % (d, n, nlines))
            for length, fn in functions(path):
                if length > MAX_FUNC_LINES and fn not in LONG_OK:
                    big.append("%s/%s: %s is %d lines" % (d, n, fn, length))
    if big:
        failed = True
        print("size: over %d lines a file or %d a function:" % (MAX_FILE_LINES, MAX_FUNC_LINES))
        for b in big:
            print("  " + b)
    else:
        print("size: no file over %d lines, no function over %d (the framer's parsers aside)" % (
            MAX_FILE_LINES, MAX_FUNC_LINES))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
