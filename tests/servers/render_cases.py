#!/usr/bin/python3
"""render_cases.py - the scripted server's responses as raw bytes, for the
framer's differential test (tests/unit/test_llhttp.c) and fuzz seeds.

Usage:
    render_cases.py [--cases DIR] [--out DIR]     # (re)write the corpus
    render_cases.py --check [--cases DIR] [--out DIR]

Every case file in tests/servers/cases/ (format: see scripted.py) becomes
tests/corpus/response/<case>.<METHOD>: the bytes of its first template as
the server sends them to the first request of a fresh server ({{ID}} and
{{CONN}} are 1, {{PAUSE ms}} is dropped).  <METHOD> is the method of the
request the response answers: GET unless the case's comment header has a
line "# method: HEAD" (or CONNECT, ...).  A case whose rendering exceeds
1 MiB is skipped (with a note on stderr).

The output directory is owned by this script: writing removes files no case
produces any more; --check exits 1 (listing the differences) when the
committed corpus differs from a fresh rendering in any way: a file missing,
different or left over.
"""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scripted  # noqa: E402  (load_case, render)

ROOT = os.path.dirname(os.path.dirname(HERE))
MAX_BYTES = 1 << 20
METHOD_LINE = re.compile(rb"^#\s*method:\s*(\S+)\s*$", re.IGNORECASE)
TOKEN = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def case_method(path):
    """The method named by a "# method: X" line of the comment header."""
    with open(path, "rb") as f:
        for line in f:
            if not line.startswith(b"#"):
                break
            m = METHOD_LINE.match(line.rstrip(b"\r\n"))
            if m:
                if not TOKEN.match(m.group(1)):
                    sys.exit("%s: bad method %r" % (path, m.group(1)))
                return m.group(1).decode()
    return "GET"


def render_case(path):
    """The raw bytes of the first response of the case (None if too big)."""
    _, templates = scripted.load_case(path)
    out = bytearray()
    for kind, val in scripted.render(templates[0], 1, 1):
        if kind == "data":
            out += val
            if len(out) > MAX_BYTES:
                return None
    return bytes(out)


def rendering(cases_dir):
    """{file name: bytes} of a fresh rendering of every case."""
    want = {}
    for name in sorted(os.listdir(cases_dir)):
        path = os.path.join(cases_dir, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        data = render_case(path)
        if data is None:
            sys.stderr.write("render_cases: %s: over 1 MiB, skipped\n" % name)
            continue
        want["%s.%s" % (name, case_method(path))] = data
    return want


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=os.path.join(ROOT, "tests/servers/cases"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/corpus/response"))
    ap.add_argument("--check", action="store_true",
                    help="compare with the committed corpus, write nothing")
    args = ap.parse_args()

    want = rendering(args.cases)
    have = set()
    if os.path.isdir(args.out):
        have = {n for n in os.listdir(args.out) if os.path.isfile(os.path.join(args.out, n))}

    diffs = []
    for name, data in want.items():
        path = os.path.join(args.out, name)
        if name not in have:
            diffs.append("missing: %s" % name)
        else:
            with open(path, "rb") as f:
                if f.read() != data:
                    diffs.append("differs: %s" % name)
    for name in sorted(have - set(want)):
        diffs.append("left over: %s" % name)

    if args.check:
        for d in diffs:
            print("render_cases: %s" % d)
        if diffs:
            print("render_cases: %s is stale: run %s" % (args.out, sys.argv[0]))
            return 1
        print("render_cases: %d responses up to date" % len(want))
        return 0

    os.makedirs(args.out, exist_ok=True)
    for name in sorted(have - set(want)):
        os.unlink(os.path.join(args.out, name))
    for name, data in want.items():
        tmp = os.path.join(args.out, "." + name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, os.path.join(args.out, name))
    for d in diffs:
        print("render_cases: %s" % d.replace("missing", "added").replace("differs", "updated").replace("left over", "removed"))
    print("render_cases: %d responses in %s" % (len(want), os.path.relpath(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
