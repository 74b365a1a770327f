#!/usr/bin/python3
"""seeds.py - build the fuzzers' scratch seed corpora from tests/corpus/.

Usage: seeds.py CORPUS_DIR OUT_DIR

Writes OUT_DIR/response/, OUT_DIR/request/, OUT_DIR/rewrite/,
OUT_DIR/llhttp/ (emptied first), in the input format of each harness (see
tests/fuzz/*.c):
  response: 16-byte control header (the file's method in both nibbles of
            byte 0; no splits, or 3 splits for a second copy), then the
            bytes of a response file; plus a few pipelined streams;
  request:  4-byte control header (prefix length, body split), then the
            bytes of a request file;
  rewrite:  the bytes of a request file;
  llhttp:   the method code (byte 0), then the bytes of a response file;
  split:    a control byte (the method in bits 0-2 and 3-5, bit 6 the
            rewrite, bit 7 request prefixes), then a response file (with
            and without the rewrite), a pipelined stream, or a request file;
  tls_record: a control byte (cipher, version, sealed or raw, stride),
            then records to seal (type, length, content) or raw bytes
            (tls_record_seeds below);
  tls_export: an export message (shim/tls_export.c; tls_export_seeds).
  tls_foreign: a control byte (cipher, version, options, modes), then
            events [op][arg] of the server, the socket and the program
            (tls_foreign_seeds below).
The regression inputs of CORPUS_DIR/fuzz-<harness>/ are copied as they are.
The fuzzers then write only into OUT_DIR, never into tests/.
"""

import hashlib
import os
import shutil
import struct
import sys

METHODS = ["GET", "HEAD", "POST", "CONNECT", "OPTIONS", "PUT", "DELETE"]


def files(d):
    if not os.path.isdir(d):
        return []
    return [os.path.join(d, n) for n in sorted(os.listdir(d))
            if not n.startswith(".") and os.path.isfile(os.path.join(d, n))]


def method_code(name):
    m = name.rsplit(".", 1)[-1] if "." in name else "GET"
    return METHODS.index(m) if m in METHODS else 7


def resp_header(code, splits=()):
    h = bytes([code | code << 4, len(splits)])
    for s in splits:
        h += struct.pack("<H", s & 0xFFFF)
    return h.ljust(16, b"\0")


def broker_seeds():
    """well-formed broker messages (pool/broker_proto.h, struct bk_msg),
    each behind its control byte (fds, side)"""
    def msg(typ, status, family, port, addr, flags=0):
        # v2: flags (BK_F_PROOF 1) and no namespace claim
        m = struct.pack("=IHHIIQ", 0x6B61626B, 2, typ, status, flags, 0)
        if typ == 4:  # HELLO: no key, no record
            return m + b"\0" * (280 - len(m))
        m += struct.pack("=HHI16sQ", family, port, 0, addr.ljust(16, b"\0"), 0)
        m += struct.pack("=IiiIQH192s6x", 3, 5, 100, 0, 12345, 4, b"tag!")
        return m
    lo4, lo6 = b"\x7f\0\0\x01", b"\0" * 15 + b"\x01"
    return [
        b"\x01" + msg(1, 0, 2, 8080, lo4),   # PUT, one fd
        b"\x00" + msg(2, 0, 10, 80, lo6),    # GET
        b"\x00" + msg(4, 0, 0, 0, b""),      # HELLO
        b"\x05" + msg(3, 0, 2, 8080, lo4),   # REPLY with its fd
        b"\x04" + msg(3, 1, 2, 8080, lo4),   # REPLY: none
        b"\x06" + msg(3, 0, 2, 8080, lo4, 1),  # REPLY with the proof and its fd
        b"\x05" + msg(3, 1, 2, 8080, lo4, 1),  # REPLY: the proof, none
    ] + [bytes([0x10 | c]) + s for c, s in sess_seeds(lo4)]


def sess_seeds(lo4):
    """the session messages (BK_SPUT 5, BK_SGET 6, BK_SREPLY 7): the
    header with no record, a struct bk_sess, the opaque bytes; decoded
    by bk_decode_any (control bit 4)"""
    def msg(typ, status, flags, timeout, sflags, body):
        m = struct.pack("=IHHIIQ", 0x6B61626B, 2, typ, status, flags, 0)
        m += struct.pack("=HHI16sQ", 2, 8443, 0, lo4.ljust(16, b"\0"), 0)
        m += b"\0" * (280 - len(m))
        m += b"\xab" * 32 + struct.pack("=IIII", timeout, sflags, len(body), 0)
        return m + body
    return [
        (0, msg(5, 0, 0, 300, 1, b"session bytes" * 20)),  # SPUT, single use
        (0, msg(6, 0, 0, 0, 0, b"")),                       # SGET
        (4, msg(7, 0, 0, 0, 0, b"session bytes" * 20)),    # SREPLY with the bytes
        (5, msg(7, 1, 1, 0, 0, b"")),                       # SREPLY: proof, none
    ] + tls_conn_seeds(lo4)


def tls_conn_seeds(lo4):
    """the TLS connection messages (BK_TPUT 8, BK_TGET 9, BK_TREPLY 10):
    as the session messages, the connection's record in the header of a
    TPUT and an OK TREPLY, its fd beside them"""
    def msg(typ, status, flags, timeout, body, record):
        m = struct.pack("=IHHIIQ", 0x6B61626B, 2, typ, status, flags, 0)
        m += struct.pack("=HHI16sQ", 2, 8443, 0, lo4.ljust(16, b"\0"), 0)
        if record:
            m += struct.pack("=IiiIQH192s6x", 3, 5, 100, 0, 12345, 4, b"tag!")
        m += b"\0" * (280 - len(m))
        m += b"\xcd" * 32 + struct.pack("=IIII", timeout, 0, len(body), 0)
        return m + body
    state = b"kpx1 state" * 300
    return [
        (1, msg(8, 0, 0, 60, state, True)),                 # TPUT, its fd
        (1, msg(8, 0, 0, 60, b"\x5a" * 65536, True)),       # TPUT at the bound
        (0, msg(9, 0, 0, 0, b"", False)),                   # TGET
        (5, msg(10, 0, 0, 0, state, True)),                 # TREPLY with fd and state
        (6, msg(10, 0, 1, 0, state, True)),                 # TREPLY: proof, fd, state
        (4, msg(10, 1, 0, 0, b"", False)),                  # TREPLY: none
        (5, msg(10, 1, 1, 0, b"", False)),                  # TREPLY: proof, none
    ]


def tls_record_seeds():
    """inputs of fuzz_tls_record: each cipher x version, sealed mode
    (records [type - 20][length][content]) and raw mode (headers of
    records that fail their tag, a partial header, an overflow)"""
    def rec(typ, content):
        return bytes([typ - 20]) + struct.pack(">H", len(content)) + content
    nst = b"\x04\x00\x00\x06" + b"ticket"
    ku_req, ku_not = b"\x18\x00\x00\x01\x01", b"\x18\x00\x00\x01\x00"
    out = []
    for cipher in range(3):
        for v12 in (0, 4):
            sealed = 8 | v12 | cipher
            out.append(bytes([sealed]) + rec(23, b"hello") + rec(23, b"") + rec(23, b"x" * 16384))
            out.append(bytes([sealed | 0x30]) + rec(22, nst[:3]) + rec(22, nst[3:] + nst) + rec(23, b"after"))
            out.append(bytes([sealed]) + rec(22, nst + ku_req) + rec(23, b"new keys") + rec(22, ku_not))
            out.append(bytes([sealed]) + rec(21, b"\x01\x5a") + rec(21, b"\x01\x2a") + rec(21, b"\x01\x00"))
            out.append(bytes([sealed]) + rec(22, b"\x00\x00\x00\x00") + rec(21, b"\x02\x28"))
            out.append(bytes([sealed | 0x10]) + rec(22, b"\x0d\x00\x00\x00") + rec(20, b"\x01"))
            raw = v12 | cipher
            out.append(bytes([raw]) + b"\x17\x03\x03\x00\x20" + b"\0" * 32 + b"\x17\x03")
            out.append(bytes([raw | 0x70]) + b"\x15\x03\x03\x00\x02\x01\x00" + b"\x17\x03\x03\x41\x01")
            out.append(bytes([raw]) + b"\x18\x03\x03\x00\x01x" + b"\x16\x03\x01\x00\x00")
    return out


def tls_export_seeds():
    """well-formed export messages (shim/tls_export.c: big-endian, the
    fixed fields, then the blobs [u32 length][bytes]), each version x
    cipher"""
    out = []
    for version in (0x0304, 0x0303):
        for cipher, klen, hlen in ((51, 16, 32), (52, 32, 48), (54, 32, 32)):
            ivlen = 4 if version == 0x0303 and cipher != 54 else 12
            slen = hlen if version == 0x0304 else 0
            def direction(b):
                return ((bytes([b]) * klen).ljust(32, b"\0") + (bytes([b]) * ivlen).ljust(12, b"\0") +
                        struct.pack(">Q", 5) + (bytes([b]) * slen).ljust(48, b"\0"))
            exp = hlen if version == 0x0304 else 48
            fin = hlen if version == 0x0304 else 12
            # flags: TLS 1.3 the KeyUpdate asked for; TLS 1.2 extended master
            # secret and renegotiation_info
            flags = 1 if version == 0x0304 else 6
            suite = {(0x0304, 51): 0x1301, (0x0304, 52): 0x1302, (0x0304, 54): 0x1303,
                     (0x0303, 51): 0xC02B, (0x0303, 52): 0xC030, (0x0303, 54): 0xCCA9}[(version, cipher)]
            m = struct.pack(">IHHBHHH", 0x6b707831, version, cipher, flags, 29, 0x0403, suite)
            m += direction(0x11) + direction(0x22)
            m += bytes([exp]) + b"\xee" * exp + b"\xc1" * 32 + b"\x5e" * 32
            m += bytes([fin]) + b"\xf1" * fin + bytes([fin]) + b"\xf2" * fin
            chain = struct.pack(">I", 3) + b"\x30\x01\x02" + struct.pack(">I", 2) + b"\x30\x09"
            for blob in (b"http/1.1", b"localhost", b"session" * 6, chain, b"conf" * 10):
                m += struct.pack(">I", len(blob)) + blob
            out.append(m)
    return out


def tls_foreign_seeds():
    """inputs of fuzz_tls_foreign: each cipher x version x a few option
    sets, scripts of server events and program calls"""
    def ev(op, arg):
        return bytes([op, arg])

    def ev16(op, n):
        return bytes([op]) + struct.pack(">H", n)
    data, read, peek, write = (lambda n: ev16(0, n)), (lambda n: ev16(7, n)), \
        (lambda n: ev16(8, n)), (lambda n: ev16(9, n))
    ticket, ku, alert, raw, release = (lambda n: ev(1, n)), (lambda r: ev(2, r)), \
        (lambda lvl, d: ev(3, d << 1 | (lvl - 1))), (lambda b: ev(4, len(b)) + b), (lambda n: ev(5, n))
    eof, error, shutdown, room, hs, empty, hold = ev(6, 1), ev(6, 0), ev(10, 0), (lambda n: ev(11, n)), \
        (lambda b: ev(12, len(b)) + b), ev(13, 0), ev(14, 0)
    reexport = ev(15, 0)  # the state passed on to a new engine (tlsf_export), at rest only
    scripts = [
        data(100) + read(10) + peek(5) + read(0) + read(200) + read(10) + hold + data(30) + release(3) +
        read(10) + release(10) + read(10) + release(0) + read(100) + data(16384) + read(16384) +
        write(50) + write(0) + write(20000) + read(1),
        ticket(40) + data(10) + read(100) + read(100) + ku(1) + data(10) + read(100) + read(100) +
        write(5) + ku(0) + ticket(8) + data(3) + peek(2) + read(100) + read(100) + read(100),
        data(10) + alert(1, 0) + read(5) + read(5) + read(5) + write(5) + shutdown + shutdown + write(5),
        shutdown + read(5) + data(10) + read(4) + shutdown + data(10) + alert(1, 0) + shutdown + shutdown,
        data(10) + eof + read(5) + read(5) + read(5) + write(5) + shutdown + shutdown,
        hold + data(10) + release(3) + read(5) + eof + release(6) + read(5) + read(5),
        data(10) + error + read(10) + read(10) + write(5) + shutdown,
        data(10) + alert(2, 20) + read(20) + read(20) + write(5) + shutdown,
        data(10) + raw(b"\x17\x03\x03\x00\x20" + b"\0" * 32) + read(20) + read(20) + write(5),
        hs(b"\x00\x00\x00\x00") + data(10) + read(20) + read(20) + write(5) + read(20),
        room(0) + write(100) + write(100) + room(1) + write(100) + room(255) + write(100) + room(0) +
        write(100) + room(255) + write(0x8000 | 100) + write(100),
        room(0) + write(100) + room(255) + write(50) + write(100),
        room(2) + write(40000 & 0x7fff) + write(40000 & 0x7fff) + room(255) + write(40000 & 0x7fff),
        ku(1) + data(1) + read(5) + room(0) + write(10) + write(10) + room(255) + write(10),
        room(0) + shutdown + shutdown + write(5) + room(255) + shutdown + alert(1, 0) + shutdown,
        empty * 40 + data(5) + read(10),
        alert(1, 90) + alert(1, 90) + data(3) + read(10) + read(10),
        ticket(3) + eof + read(5) + read(5) + read(5),
        reexport + data(100) + read(10) + reexport + read(200) + reexport + write(30) + reexport +
        ku(1) + data(10) + read(100) + reexport + read(100) + write(5) + reexport + ticket(8) + data(3) +
        read(100) + read(100) + reexport + room(0) + write(10) + reexport + room(255) + write(10) +
        reexport + ku(0) + data(4) + read(4) + read(4) + reexport + write(9) + alert(1, 0) + read(5) +
        reexport + read(5),
    ]
    out = []
    for ctl in (0x10, 0x11, 0x12, 0x14, 0x15, 0x16, 0x00, 0x18, 0x30, 0x70, 0x94, 0x84):
        for sc in scripts:
            out.append(bytes([ctl]) + sc)
    return out


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    seeds = {"response": [], "request": [], "rewrite": [], "llhttp": [], "broker": [],
             "split": [], "tls_record": [], "tls_export": [], "tls_foreign": []}
    gets = []
    for sub in ("response", "response-hand"):
        for path in files(os.path.join(corpus, sub)):
            data = open(path, "rb").read()
            code = method_code(os.path.basename(path))
            seeds["response"].append(resp_header(code) + data)
            seeds["llhttp"].append(bytes([code]) + data)
            seeds["split"].append(bytes([code | code << 3]) + data)
            seeds["split"].append(bytes([code | code << 3 | 0x40]) + data)
            n = len(data)
            seeds["response"].append(resp_header(code, (n // 4, n // 2, 3 * n // 4)) + data)
            if code == 0 and n < 4096:
                gets.append(data)
    # pipelined: a few responses back to back
    for k in range(0, len(gets), 3):
        seeds["response"].append(resp_header(0, (7, 100)) + b"".join(gets[k:k + 3]))
        seeds["split"].append(bytes([0x40]) + b"".join(gets[k:k + 3]))
    for path in files(os.path.join(corpus, "request")):
        data = open(path, "rb").read()
        seeds["request"].append(struct.pack("<HH", len(data) // 2, len(data) // 3) + data)
        seeds["rewrite"].append(data)
        seeds["split"].append(bytes([0x80]) + data)
    seeds["broker"] = broker_seeds()
    seeds["tls_record"] = tls_record_seeds()
    seeds["tls_export"] = tls_export_seeds()
    seeds["tls_foreign"] = tls_foreign_seeds()
    for name, lst in seeds.items():
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for data in lst:
            h = hashlib.sha1(data).hexdigest()
            with open(os.path.join(d, h), "wb") as f:
                f.write(data)
        for path in files(os.path.join(corpus, "fuzz-" + name)):
            shutil.copy(path, d)
        print("seeds: %s: %d files" % (d, len(os.listdir(d))))


if __name__ == "__main__":
    main()
