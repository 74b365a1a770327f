#!/usr/bin/env python3
"""The wrapper's differential matrix (docs/wrapper.md): every command shape
below runs without and with `keepalive`, on each of the wrapper's paths
(a private broker, a per-user broker, KEEPALIVE_STATS=1, the wrapper run
by the wrapper, a caller with fds 3-9 open, a removed working directory),
and what the
caller sees must be the same: the raw wait status (exit code, signal),
stdout, stderr (the summed stats line aside) and the environment.

usage: wrapper_matrix.py WRAPPER PRELOAD WORKDIR
Prints one line per difference and exits 1 if there is any."""
import os
import subprocess
import sys

wrap, preload, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)

# a caller's environment a shell would not pass on as it is
base_env = {
    "PATH": os.environ["PATH"],
    "HOME": os.environ.get("HOME", "/"),
    "a.b": "1", "x-y": "2", "1x": "3", "BASH_FUNC_f%%": "() {  echo fn\n}",
    "lib": "USERVAL", "dir": "D", "base": "B", "sock": "S", "here": "H", "self": "SELF",
    "e": "E", "bpid": "P", "private": "PR", "stats": "ST", "IFS": ":", "PS4": "+x ",
    "SHLVL": "7", "OLDPWD": "/nonexistent", "EMPTY": "", "sp ace": "v v",
    "LANG": "C",
}

# a sanitizer build (make test-asan): its runtime would report the
# command's own SIGSEGV as its error; the same options on both sides
if os.environ.get("KEEPALIVE_ASAN"):
    base_env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":handle_segv=0:handle_sigbus=0"
    base_env["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "")

d = work
with open(f"{d}/badinterp", "w") as f:
    f.write("#!/nonexistent/interp\necho hi\n")
with open(f"{d}/badelf", "wb") as f:
    f.write(b"\x7fELF\x02\x01\x01garbage")
with open(f"{d}/noexec", "w") as f:
    f.write("echo hi\n")
with open(f"{d}/script", "w") as f:
    f.write("echo script \"$@\"; exit 3\n")
os.chmod(f"{d}/badinterp", 0o755)
os.chmod(f"{d}/badelf", 0o755)
os.chmod(f"{d}/script", 0o755)
os.makedirs(f"{d}/adir", exist_ok=True)

shapes = []
for n in (0, 1, 42, 126, 127, 255):
    shapes.append(("exit %d" % n, ["sh", "-c", "echo out; echo err >&2; exit %d" % n]))
for s in ("INT", "TERM", "QUIT", "HUP", "USR1", "USR2", "SEGV", "ABRT", "PIPE", "ALRM", "KILL"):
    shapes.append(("self " + s, ["sh", "-c", "kill -%s $$; sleep 5" % s]))
# a signal to the whole process group (timeout, kill -- -PGID): handled
# (counted: once) and not
for s in ("INT", "TERM", "HUP", "USR1"):
    shapes.append(("group handled " + s,
                   ["bash", "-c", 'trap "echo got-%s" %s; kill -%s 0; kill -%s 0; echo after' % (s, s, s, s)]))
for s in ("INT", "TERM", "HUP"):
    shapes.append(("group " + s, ["sh", "-c", "kill -%s 0; sleep 5" % s]))
shapes += [
    ("env", ["env", "-0"]),
    ("stdin", ["sh", "-c", "cat; echo done"]),
    ("args", ["printf", "[%s]", "a b", "", "-x", "--", "*"]),
    ("script no shebang", [f"{d}/script", "1", "2"]),
    ("not found", ["nosuchcmd-matrix"]),
    ("no such file", [f"{d}/nosuchfile"]),
    ("a directory", [f"{d}/adir"]),
    ("not executable", [f"{d}/noexec"]),
    ("interpreter missing", [f"{d}/badinterp"]),
    ("not an ELF", [f"{d}/badelf"]),
    ("dash first", ["-x"]),
]


def run(argv, env, cwd, fds=()):
    """the raw wait status, stdout, stderr of argv in a session of its own
    (with the caller's fds FDS open in it)"""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, pass_fds=fds)
    out, err = p.communicate(b"input\n", timeout=60)
    return p.returncode, out, err


def norm_err(err, argv0):
    lines = [l for l in err.split(b"\n") if not l.startswith(b"libkeepalive: processes=")]
    err = b"\n".join(lines)
    # the program named in an exec error: env's quoting, our name
    err = err.replace(b"env: '%s': " % argv0.encode(), b"X: %s: " % argv0.encode())
    err = err.replace(b"keepalive: %s: " % argv0.encode(), b"X: %s: " % argv0.encode())
    err = err.replace(b"command not found", b"No such file or directory")
    # the removed directory's name: one per run
    import re
    err = re.sub(rb"gone-[0-9]+", b"gone-N", err)
    return err


def main():
    diffs = 0
    cases = 0
    daemon_xdg = f"{work}/xdg-daemon"
    os.makedirs(daemon_xdg, mode=0o700, exist_ok=True)
    subprocess.run([wrap, "--daemon"], env=dict(base_env, XDG_RUNTIME_DIR=daemon_xdg),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    paths = {
        "private": {},
        "daemon": {"XDG_RUNTIME_DIR": daemon_xdg},
        "stats": {"KEEPALIVE_STATS": "1"},
        # keepalive keepalive CMD: a script under the wrapper that runs it
        # again (the inner one finds the outer's private broker)
        "nested": {},
        # a caller with fds 3-9 open: the entry point's copy of the
        # environment lands at 10 or above (dash reads fd numbers 0-9 only)
        "fds": {},
        # a working directory that was removed (a deploy replaced it)
        "gone": {},
    }
    null = [os.open("/dev/null", os.O_RDONLY) for _ in range(3, 10)]
    for want, fd in zip(range(3, 10), list(null)):
        if fd != want:
            os.dup2(fd, want)
            os.close(fd)
    null = list(range(3, 10))
    try:
        for pname, extra in paths.items():
            for sname, argv in shapes:
                cases += 1
                xdg = f"{work}/xdg-{pname}-{cases}"
                os.makedirs(xdg, mode=0o700, exist_ok=True)
                env = dict(base_env, XDG_RUNTIME_DIR=xdg)
                env.update(extra)
                # without: env(1) runs it (its exec errors are the reference)
                fds = null if pname == "fds" else ()
                pre = []
                if pname == "gone":
                    pre = ["sh", "-c", 'mkdir "$0" && cd "$0" && rmdir "$PWD" && exec "$@"', f"{work}/gone-{cases}"]
                plain = run(pre + ["env", "--"] + argv, env, work, fds)
                wenv = dict(env, KEEPALIVE_PRELOAD=preload)
                nest = []
                if pname == "nested":
                    nest = [wrap, "--"]
                    # the wrapper's own library, as a user runs it (a
                    # sanitizer build's preload is taken whole: not there)
                    if not os.environ.get("KEEPALIVE_ASAN"):
                        del wenv["KEEPALIVE_PRELOAD"]
                got = run(pre + nest + [wrap, "--"] + argv, wenv, work, fds)
                a = (plain[0], plain[1], norm_err(plain[2], argv[0]))
                b = (got[0], got[1], norm_err(got[2], argv[0]))
                if sname == "env":
                    keep = lambda o: b"\0".join(sorted(e for e in o.split(b"\0")
                                                       if not e.startswith((b"LD_PRELOAD=", b"KEEPALIVE_"))))
                    # the library once in LD_PRELOAD, on every path
                    pre = [e for e in got[1].split(b"\0") if e.startswith(b"LD_PRELOAD=")]
                    if pre and len(pre[0].replace(b":", b" ").split()) != len(preload.split()):
                        diffs += 1
                        print(f"DIFF {pname} {sname}: {pre[0]!r}")
                    a = (a[0], keep(a[1]), a[2])
                    b = (b[0], keep(b[1]), b[2])
                if a != b:
                    diffs += 1
                    print(f"DIFF {pname} {sname}: without {a!r}\n{'':>10}with    {b!r}")
    finally:
        subprocess.run([wrap, "--stop"], env=dict(base_env, XDG_RUNTIME_DIR=daemon_xdg),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"{cases} cases, {diffs} differences")
    return 1 if diffs else 0


sys.exit(main())
