"""tcp_state.py - what a Python test client sees of its own socket and
threads in the kernel's tables (as tcp_state.h for the C clients): events
the program alone would see too, awaited without timings.  Imported by
the clients beside it (python puts a script's own folder on sys.path)."""
import os
import sys
import time


def inode(s):
    """The inode of socket s (what /proc/net/tcp names it by)."""
    return os.fstat(s.fileno()).st_ino


def tcp_state(ino):
    """The state of the TCP socket of inode ino (/proc/net/tcp: 1
    ESTABLISHED, 8 CLOSE_WAIT...), 0 when none is listed (reset, gone)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if int(p[9]) == ino:
                return int(p[3], 16)
    return 0


def sleeping_in(tid):
    """The system call thread tid of this process sleeps in, -1 if none."""
    with open("/proc/self/task/%d/syscall" % tid) as f:
        first = f.read().split()[0]
    return int(first) if first.isdigit() else -1


def until(cond, what):
    """Back once cond() holds; exits naming what if it never does."""
    for _ in range(100000):
        if cond():
            return
        time.sleep(0.0002)
    sys.exit("%s: never %s" % (os.path.basename(sys.argv[0]), what))
