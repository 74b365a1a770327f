#!/usr/bin/python3
"""owner_shapes.py - the process-shape matrix of docs/owner.md.

Programs built from steps, run with and without the library against
tests/servers/echo_server.py (which answers every request with its own
target and logs the connection that carried it), compared automatically.

    owner_shapes.py gen DEPTH [--uid] [--limit N --seed S]   shapes, one a line
    owner_shapes.py run PORT SHAPES_FILE                     run each, print results
    owner_shapes.py check SHAPES PLAIN_OUT SHIM_OUT PLAIN_LOG SHIM_LOG

A shape is a list of steps "<actor><op>": actor P (the program) or K (its
child, made by P's f or s).  The actors take turns in the shape's order
(a token passed through pipes), so every run of a shape does the same
things in the same order.  Ops:
  c  connect a new socket (pushed on the actor's stack of fds)
  r  request on the top fd (keep-alive), read the response
  q  request with "Connection: close", read the response and then EOF
  x  close the top fd
  d  dup the top fd (both kept)
  f  fork: K starts with copies of all of P's fds
  s  spawn K with subprocess(pass_fds=P's fds): fork and exec
  p  pass the top fd to the other actor over a Unix socket (SCM_RIGHTS);
     the sender keeps its copy
  u  P drops from root to nobody (setgroups, setresgid, setresuid)
  e  the actor exits now
Every request's target is /<shape>/<socket>/<actor><step>: the socket is
the program's own (P1, K2...: a connect() made it), so the server's log says
which program socket each request came from.

check fails (prints VIOLATION lines, exits 1) when, for a shape:
  - the programs printed something else with the library than without
    (a response that is not the answer to the request sent, a timeout...);
  - the server executed another multiset of requests;
  - with the library, one server connection carried requests of two
    program sockets whose lives overlapped (a socket lives from its
    connect() until its last fd in every process is closed, its holder
    exits, or it was answered with a close): a connection had two owners;
  - one server connection carried sockets made under two identities.
"""
import itertools
import os
import random
import select
import socket
import subprocess
import sys

TIMEOUT_MS = 4000
OPS_P0 = "crqxdfsu"   # P before K exists
OPS_PK = "crqxdpe"    # either actor once K exists


# ------------------------------------------------------------ generation

def valid_prefixes(depth, uid):
    """Every valid shape of up to depth steps, as lists of (actor, op)."""
    out = []

    def walk(shape, st):
        if shape:
            out.append(list(shape))
        if len(shape) == depth:
            return
        actors = [a for a in "PK" if st["alive"][a]]
        for a in actors:
            ops = OPS_PK if st["alive"]["K"] or st["kdone"] else OPS_P0
            for op in ops:
                nst = step_state(st, a, op, uid)
                if nst is None:
                    continue
                shape.append((a, op))
                walk(shape, nst)
                shape.pop()

    walk([], {"alive": {"P": True, "K": False}, "kdone": False,
              "stack": {"P": [], "K": []}, "n": 0, "closed": set(),
              "u": False})
    return out


def step_state(st, a, op, uid):
    """The state after actor a does op, or None when op is not allowed."""
    stack = {k: list(v) for k, v in st["stack"].items()}
    top = stack[a][-1] if stack[a] else None
    nst = dict(st, stack=stack, alive=dict(st["alive"]), closed=set(st["closed"]))
    other = "K" if a == "P" else "P"
    if op == "c":
        if len(stack[a]) >= 2:
            return None
        nst["n"] = st["n"] + 1
        stack[a].append("L%d" % nst["n"])
    elif op in "rq":
        if top is None or top in st["closed"]:
            return None
        if op == "q":
            nst["closed"].add(top)
    elif op in "xd":
        if top is None or (op == "d" and len(stack[a]) >= 3):
            return None
        if op == "x":
            stack[a].pop()
        else:
            stack[a].append(top)
    elif op in "fs":
        if a != "P" or st["alive"]["K"] or st["kdone"]:
            return None
        nst["alive"]["K"] = True
        stack["K"] = list(stack["P"])
    elif op == "p":
        if top is None or not st["alive"][other] or len(stack[other]) >= 3:
            return None
        stack[other].append(top)
    elif op == "u":
        if not uid or a != "P" or st["u"]:
            return None
        nst["u"] = True
    elif op == "e":
        if not st["alive"][other]:
            return None  # the last actor exits at the end anyway
        nst["alive"][a] = False
        stack[a] = []
        if a == "K":
            nst["kdone"] = True
    return nst


def interesting(shape):
    """Worth running: it has an ownership event, and a connection that
    served a request is let go (a close of one of its fds, or an exit)
    before a later connect() whose socket then carries a request: the
    moment a pool could hand a connection to someone else."""
    ops = [op for _, op in shape]
    if ops[:1] != ["c"] or not any(op in "fspdue" for op in ops):
        return False
    stack = {"P": [], "K": []}
    served, let_go, n = set(), False, 0
    for a, op in shape:
        if op == "c":
            n += 1
            stack[a].append((n, let_go))
        elif op in "rq" and stack[a]:
            served.add(stack[a][-1][0])
            if stack[a][-1][1]:
                return True
        elif op == "x" and stack[a]:
            let_go |= stack[a].pop()[0] in served
        elif op in "fs":
            stack["K"] = list(stack["P"])
        elif op == "p" and stack[a]:
            stack["K" if a == "P" else "P"].append(stack[a][-1])
        elif op == "e":
            let_go |= any(s in served for s, _ in stack[a])
            stack[a] = []
    return False


def fmt(shape):
    return " ".join(a + op for a, op in shape)


def parse(line):
    return [(t[0], t[1]) for t in line.split()]


def gen(argv):
    depth = int(argv[0])
    uid = "--uid" in argv
    limit = seed = None
    if "--limit" in argv:
        limit = int(argv[argv.index("--limit") + 1])
        seed = int(argv[argv.index("--seed") + 1])
    shapes = [s for s in valid_prefixes(depth, uid) if interesting(s)]
    if limit is not None and len(shapes) > limit:
        shapes = random.Random(seed).sample(shapes, limit)
    for s in shapes:
        print(fmt(s))


# ------------------------------------------------------------ running

class Actor:
    def __init__(self, me, shape, idx, port, stack, fds):
        self.me, self.shape, self.idx, self.port = me, shape, idx, port
        self.stack = stack          # [(fd, socket name)]
        self.fds = fds              # the run's pipes and Unix socket
        self.serial = 0

    def say(self, j, op, what):
        os.write(1, ("%d %d%s%s %s\n" % (self.idx, j, self.me, op, what)).encode())

    def wait_token(self):
        os.read(self.fds["tok" + self.me][0], 1)

    def give_token(self, to):
        os.write(self.fds["tok" + to][1], b"t")

    def take_passed(self):
        us = self.fds["us" + self.me]
        while True:
            r, _, _ = select.select([us], [], [], 0)
            if not r:
                return
            msg, fds, _, _ = socket.recv_fds(us, 64, 4)
            if not msg:
                return  # the other actor has gone
            for fd, name in zip(fds, [n for n in msg.decode().split(",") if n]):
                self.stack.append((fd, name))

    def read_response(self, fd, want_eof):
        buf = b""
        head = None
        need = None
        while True:
            if head is not None and len(buf) >= need and not want_eof:
                break
            p = select.poll()
            p.register(fd, select.POLLIN)
            if not p.poll(TIMEOUT_MS):
                return buf, "timeout"
            try:
                chunk = os.read(fd, 65536)
            except OSError as e:
                return buf, "err-" + (errno_name(e.errno))
            if not chunk:
                return buf, "eof"
            buf += chunk
            if head is None and b"\r\n\r\n" in buf:
                head, _, _ = buf.partition(b"\r\n\r\n")
                need = len(head) + 4
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        need += int(v)
            if head is not None and want_eof and len(buf) > need:
                return buf, "extra"
        return buf, "done"

    def request(self, j, op):
        fd, name = self.stack[-1]
        target = "/%d/%s/%s%d" % (self.idx, name, self.me, j)
        close = "Connection: close\r\n" if op == "q" else ""
        req = "GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (target, close)
        try:
            os.write(fd, req.encode())
        except OSError as e:
            return "write-" + errno_name(e.errno)
        buf, end = self.read_response(fd, op == "q")
        body = buf.partition(b"\r\n\r\n")[2].decode("latin-1")
        if body != target:
            # whose answer it is, without the shape's number
            return "got[%s] %s" % (body.split("/", 2)[-1] if body else "", end)
        if op == "q":
            return "ok" if end == "eof" else "ok-no-eof-" + end
        return "ok" if end == "done" else end

    def run(self, start):
        bound_actor()
        shape = self.shape
        for j in range(start, len(shape)):
            a, op = shape[j]
            if a != self.me:
                continue
            if j > 0 and shape[j - 1][0] != self.me:
                self.wait_token()
                self.await_exit(j)
            self.take_passed()
            try:
                last = self.do(j, op)
            except OSError as e:
                self.say(j, op, "raised-" + errno_name(e.errno))
                last = False
            nxt = self.next_step(j)
            if last:
                if nxt is not None and shape[nxt][0] != self.me:
                    self.give_token(shape[nxt][0])
                return
            if nxt is not None and shape[nxt][0] != self.me:
                self.give_token(shape[nxt][0])
            if nxt is not None and not any(s[0] == self.me for s in shape[j + 1:]):
                return  # my part is over: exit (the other waits for it)

    def next_step(self, j):
        return j + 1 if j + 1 < len(self.shape) else None

    def await_exit(self, j):
        """The actor before me exited (e) or finished: wait until it is
        gone, so that what it held is released before my step."""
        prev = self.shape[j - 1][0]
        rest = [s for s in self.shape[j:] if s[0] == prev]
        if not rest:
            os.read(self.fds["gone" + prev][0], 1)

    def do(self, j, op):
        if op == "c":
            self.serial += 1
            name = "%s%d" % (self.me, self.serial)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect(("127.0.0.1", self.port))
            except OSError as e:
                s.close()
                self.say(j, op, "err-" + errno_name(e.errno))
                return False
            self.stack.append((s.detach(), name))
            self.say(j, op, "ok")
        elif op in "rq":
            self.say(j, op, self.request(j, op))
        elif op == "x":
            fd, _ = self.stack.pop()
            os.close(fd)
            self.say(j, op, "ok")
        elif op == "d":
            fd, name = self.stack[-1]
            self.stack.append((os.dup(fd), name))
            self.say(j, op, "ok")
        elif op == "f":
            pid = os.fork()
            if pid == 0:
                self.me = "K"
                self.serial = 0
                os.close(self.fds["goneP"][1])
                self.run(j + 1)
                self.exit()
            os.close(self.fds["goneK"][1])
            self.say(j, op, "ok")
        elif op == "s":
            keep = [fd for fd, _ in self.stack] + [
                self.fds["tokP"][0], self.fds["tokP"][1],
                self.fds["tokK"][0], self.fds["tokK"][1],
                self.fds["usK"].fileno(), self.fds["goneK"][1],
                self.fds["goneP"][0], self.fds["done"]]
            args = [sys.executable, os.path.abspath(__file__), "actor",
                    str(self.idx), str(self.port), fmt(self.shape), str(j + 1),
                    ",".join("%d:%s" % e for e in self.stack),
                    ",".join(str(k) for k in keep[len(self.stack):])]
            self.child = subprocess.Popen(args, pass_fds=keep)
            os.close(self.fds["goneK"][1])
            self.say(j, op, "ok")
        elif op == "p":
            fd, name = self.stack[-1]
            other = "K" if self.me == "P" else "P"
            socket.send_fds(self.fds["us" + self.me], [(name + ",").encode()], [fd])
            self.say(j, op, "ok")
        elif op == "u":
            try:
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                self.say(j, op, "ok")
            except OSError as e:
                self.say(j, op, "err-" + errno_name(e.errno))
        elif op == "e":
            return True
        return False

    def exit(self):
        sys.stdout.flush()
        # a normal exit: the library's destructor runs (its broker hand-over)
        sys.exit(0)


def errno_name(n):
    import errno
    return errno.errorcode.get(n, str(n))


def make_fds():
    fds = {}
    for k in ("tokP", "tokK", "goneP", "goneK"):
        fds[k] = os.pipe()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fds["usP"], fds["usK"] = a, b
    return fds


def run_shape(idx, port, shape):
    """Fork P for shape idx; wait until P and K have both exited."""
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(done_r)
        fds = make_fds()
        fds["done"] = done_w
        actor = Actor("P", shape, idx, port, [], fds)
        actor.run(0)
        if hasattr(actor, "child"):
            pass  # not waited for: K may outlive P (P e)
        actor.exit()
    os.close(done_w)
    os.read(done_r, 1)  # EOF once every holder of done_w is gone
    os.close(done_r)
    os.waitpid(pid, 0)


def run(argv):
    port = int(argv[0])
    with open(argv[1]) as f:
        shapes = [parse(line) for line in f if line.strip()]
    signal_timeout()
    for idx, shape in enumerate(shapes):
        run_shape(idx, port, shape)
    # reap spawned children that outlived their parent
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def signal_timeout():
    import signal
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def bound_actor():
    """An actor that waits for a token that never comes (its partner
    died) ends here, after the longest a shape may take."""
    import signal
    signal.signal(signal.SIGALRM, lambda *_: os._exit(3))
    signal.alarm(60)


def actor_main(argv):
    idx, port, shape, start = int(argv[0]), int(argv[1]), parse(argv[2]), int(argv[3])
    stack = []
    if argv[4]:
        for e in argv[4].split(","):
            fd, name = e.split(":")
            stack.append((int(fd), name))
    k = [int(x) for x in argv[5].split(",")]
    fds = {"tokP": (k[0], k[1]), "tokK": (k[2], k[3]),
           "usK": socket.socket(fileno=k[4]), "goneK": (None, k[5]),
           "goneP": (k[6], None), "done": k[7]}
    actor = Actor("K", shape, idx, port, stack, fds)
    actor.run(start)
    actor.exit()


# ------------------------------------------------------------ checking

def lives(shape):
    """For each program socket: (made at step, released at step, identity)."""
    made, released, ident = {}, {}, {}
    held = {}                     # socket -> fds open in all processes
    stack = {"P": [], "K": []}
    uid = {"P": "root", "K": "root"}
    n = 0
    for j, (a, op) in enumerate(shape):
        if op == "c":
            n += 1
            name = "%s" % n  # the driver names them per actor: mapped below
            stack[a].append((a, j))
            made[(a, j)] = j
            ident[(a, j)] = uid[a]
            held[(a, j)] = 1
        elif op == "q":
            s = stack[a][-1]
            released.setdefault(s, j + 1)
        elif op == "x":
            s = stack[a].pop()
            held[s] -= 1
            if held[s] == 0:
                released.setdefault(s, j + 1)
        elif op == "d":
            s = stack[a][-1]
            stack[a].append(s)
            held[s] += 1
        elif op in "fs":
            stack["K"] = list(stack["P"])
            uid["K"] = uid["P"]
            for s in stack["K"]:
                held[s] += 1
        elif op == "p":
            other = "K" if a == "P" else "P"
            s = stack[a][-1]
            stack[other].append(s)
            held[s] += 1
        elif op == "u":
            uid["P"] = "nobody"
        elif op == "e":
            for s in stack[a]:
                held[s] -= 1
                if held[s] == 0:
                    released.setdefault(s, j + 1)
            stack[a] = []
    end = len(shape) + 1
    return made, {s: released.get(s, end) for s in made}, ident


def socket_names(shape):
    """(actor, step of its c) -> the name the driver gives it (P1, K1...)."""
    names, serial = {}, {"P": 0, "K": 0}
    for j, (a, op) in enumerate(shape):
        if op in "fs":
            serial["K"] = 0
        if op == "c":
            serial[a] += 1
            names["%s%d" % (a, serial[a])] = (a, j)
    return names


def read_log(path):
    per = {}
    with open(path) as f:
        for line in f:
            cid, target = line.split()
            parts = target.split("/")
            if len(parts) != 4:
                continue
            per.setdefault(int(parts[1]), []).append((cid, parts[2], parts[3]))
    return per


def read_out(path):
    per = {}
    with open(path) as f:
        for line in f:
            idx, rest = line.split(" ", 1)
            per.setdefault(int(idx), []).append(rest.rstrip("\n"))
    return per


def check(argv):
    with open(argv[0]) as f:
        shapes = [parse(line) for line in f if line.strip()]
    pout, sout = read_out(argv[1]), read_out(argv[2])
    plog, slog = read_log(argv[3]), read_log(argv[4])
    bad = 0
    for idx, shape in enumerate(shapes):
        why = []
        steps = len(shape) - sum(1 for _, op in shape if op == "e")
        if len(pout.get(idx, [])) != steps:
            why.append("without the library: %d of %d steps reported" % (
                len(pout.get(idx, [])), steps))
        if sorted(pout.get(idx, [])) != sorted(sout.get(idx, [])):
            why.append("output: without %s, with %s" % (
                sorted(set(pout.get(idx, [])) - set(sout.get(idx, []))),
                sorted(set(sout.get(idx, [])) - set(pout.get(idx, [])))))
        preq = sorted((s, r) for _, s, r in plog.get(idx, []))
        sreq = sorted((s, r) for _, s, r in slog.get(idx, []))
        if preq != sreq:
            why.append("executions: without %d %s, with %d %s" % (
                len(preq), sorted(set(preq) - set(sreq)), len(sreq),
                sorted(set(sreq) - set(preq))))
        made, released, ident = lives(shape)
        names = socket_names(shape)
        for run_name, log in (("without", plog), ("with", slog)):
            by_conn = {}
            for cid, sock, _ in log.get(idx, []):
                if sock in names:
                    by_conn.setdefault(cid, set()).add(names[sock])
            for cid, socks in by_conn.items():
                for s1, s2 in itertools.combinations(sorted(socks, key=lambda s: made[s]), 2):
                    if made[s2] < released[s1]:
                        why.append("%s the library: one connection carried sockets %s "
                                   "(steps %d-%d) and %s (made at %d)" % (
                                       run_name, s1, made[s1], released[s1], s2, made[s2]))
                    if ident[s1] != ident[s2]:
                        why.append("%s the library: one connection carried a socket "
                                   "of %s and one of %s" % (run_name, ident[s1], ident[s2]))
        if why:
            bad += 1
            print("VIOLATION shape %d [%s]:" % (idx, fmt(shape)))
            for w in why:
                print("   " + w)
    print("%d shapes, %d differ" % (len(shapes), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "gen":
        gen(rest)
    elif cmd == "run":
        run(rest)
    elif cmd == "actor":
        actor_main(rest)
    elif cmd == "check":
        sys.exit(check(rest))
    else:
        sys.exit("usage: see the docstring")
