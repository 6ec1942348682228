#!/usr/bin/env python3
"""A hostile or broken peer of dljob's TCP rendezvous, for
world/test/test_world_hostile.sh.  It speaks the rendezvous protocol of
world/world_star.c and world_ring.c (greeting, hello, proof: see
world/world_int.h), and, where a rank 0 sends no greeting, the protocol of
dljob before authentication (a bare hello with a guessable job key), so that
the same test shows what the old code let through.

Modes (every mode prints "stranger: ..." lines saying what happened):
  hello HOST PORT --rank R --size N [--secret HEX] [--after-table exit]
      join as rank R; without --secret, with a random key (an impostor).
      --after-table exit: a rank of the job that dies after the table.
  rogue0 PORT          listen on 127.0.0.1:PORT as a fake rank 0.
  busy PORT [--talk|--greet] [--count N]
                       hold PORT (and the N-1 ports after it): accept and stay
                       silent (or say hello in another protocol, or send a
                       rank 0's greeting and then nothing), never close.
  idle HOST PORT --count N [--partial]
                       N connections that say nothing (or half a hello).
  member HOST PORT --secret HEX --trickle S
                       the last rank of a world of 3, played honestly (it has
                       the secret) up to the first allreduce, where it sends
                       its ring successor one byte every S seconds.
  ringhijack --pids P,Q --skip PORT --size N --seconds S
                       connect to every listener of those processes (their
                       ring listeners): once silently, and once claiming to
                       be each rank, then streaming floats of 1000.0.
  relay PORT --to PORT2
                       hold PORT and pass every connection on to PORT2 (where
                       rank 0 went, since PORT was taken) byte for byte, both
                       ways, saying when a table from rank 0 went through it:
                       then it sits in the middle of a rank's connection.
  ringflood --pids P,Q --skip PORT --seconds S [--hold N]
                       open connections to every listener of those processes
                       (their ring listeners) as fast as it can, saying
                       nothing, each held until N newer ones are open.
"""
import argparse
import hashlib
import hmac
import os
import re
import socket
import struct
import subprocess
import sys
import time

MAGIC = 0x646C6A32
OLD_MAGIC = 0x646C6A31
NODE = 64


def say(*a):
    print("stranger:", *a, flush=True)


def mac(key, label, n1, n2, ints, extra=b"", jobkey=""):
    m = hmac.new(key, digestmod=hashlib.sha256)
    m.update(label.encode() + b"\0")
    m.update(jobkey.encode().ljust(64, b"\0")[:64])
    m.update(n1)
    m.update(n2)
    for i in ints:
        m.update(struct.pack(">I", i))
    m.update(extra)
    return m.digest()


def end_words(host, port):
    """rank 0's end of a star connection, as the MACs take it (world_star.c
    star_end): the IPv4 address as ::ffff:a.b.c.d in 4 words, the port."""
    a = b"\0" * 10 + b"\xff\xff" + socket.inet_aton(host)
    return list(struct.unpack(">IIII", a)) + [port]


def read_exact(s, n, timeout):
    s.settimeout(timeout)
    b = b""
    while len(b) < n:
        try:
            c = s.recv(n - len(b))
        except socket.timeout:
            return b
        if not c:
            return b
        b += c
    return b


def connect(host, port, until):
    while True:
        try:
            return socket.create_connection((host, port), timeout=1)
        except OSError:
            if time.monotonic() > until:
                raise
            time.sleep(0.05)


def mode_hello(a):
    key = bytes.fromhex(a.secret) if a.secret else os.urandom(32)
    jobkey = "-.-:%d" % a.port
    s = connect(a.host, a.port, time.monotonic() + 10)
    g = read_exact(s, 40, 0.5)
    node = b"stranger".ljust(NODE, b"\0")
    if len(g) == 0:
        # No greeting: the old protocol (job key "JOB.STEP@ADDR:PORT").
        oldkey = ("-.-@%s:%d" % (a.host, a.port)).encode().ljust(64, b"\0")
        s.sendall(struct.pack("=IIII", socket.htonl(OLD_MAGIC), socket.htonl(a.rank),
                              socket.htonl(a.size), 0) + oldkey + node)
        say("old protocol: sent a hello as rank", a.rank)
        table = read_exact(s, 8, 30)
        say("old protocol: got %d bytes back" % len(table))
        if a.after_table == "exit":
            say("exits after the table")
            return 0
        time.sleep(3600)
        return 0
    magic, role = struct.unpack(">II", g[:8])
    n0 = g[8:40]
    if magic != MAGIC or role != 1:
        say("not a dljob greeting")
        return 1
    mine = os.urandom(32)
    end = end_words(a.host, a.port)
    ints = [a.rank, a.size, 0] + end
    h = struct.pack(">IIII", MAGIC, a.rank, a.size, 0) + node + mine
    h += mac(key, "dljob star hello", n0, mine, ints, node, jobkey)
    s.sendall(h)
    p = read_exact(s, 36, 6)
    if len(p) < 36:
        say("dropped by rank 0 (%d bytes of proof)" % len(p))
        return 0
    ok = p[4:] == mac(key, "dljob star proof", mine, n0, [a.rank] + end, b"", jobkey)
    say("accepted as rank %d, rank 0's proof %s" % (a.rank, "good" if ok else "BAD"))
    hdr = read_exact(s, 8, 30)
    if len(hdr) == 8:
        t, n = struct.unpack(">II", hdr)
        body = read_exact(s, n, 5)
        say("message type %d: %r" % (t, body[:200]))
    if a.after_table == "exit":
        say("exits after the table")
        return 0
    time.sleep(3600)
    return 0


def read_msg(s, want):
    while True:
        hdr = read_exact(s, 8, 30)
        if len(hdr) < 8:
            raise SystemExit("stranger: connection to rank 0 lost")
        t, n = struct.unpack(">II", hdr)
        body = read_exact(s, n, 30)
        if t == want:
            return body
        say("skipped message type", t)


def mode_member(a):
    key = bytes.fromhex(a.secret)
    jobkey = "-.-:%d" % a.port
    rank, size = 2, 3
    host = socket.gethostname().encode()[:63]
    node = host.ljust(NODE, b"\0")
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    rport = ls.getsockname()[1]
    s = connect(a.host, a.port, time.monotonic() + 10)
    n0 = read_exact(s, 40, 5)[8:40]
    mine = os.urandom(32)
    h = struct.pack(">IIII", MAGIC, rank, size, rport) + node + mine
    h += mac(key, "dljob star hello", n0, mine, [rank, size, rport] + end_words(a.host, a.port),
             node, jobkey)
    s.sendall(h)
    read_exact(s, 36, 5)
    table = read_msg(s, 2)
    fam, port = struct.unpack(">II", table[:8])
    addr = socket.inet_ntoa(table[8:12])
    # Ring: connect to rank 0 (the successor), then accept rank 1.
    r0 = socket.create_connection((addr, port), timeout=5)
    theirs = read_exact(r0, 40, 5)[8:40]
    mine = os.urandom(32)
    r0.sendall(struct.pack(">II", MAGIC, rank) + mine +
               mac(key, "dljob ring hello", theirs, mine, [rank, size], b"", jobkey))
    read_exact(r0, 36, 5)
    c, _ = ls.accept()
    my = os.urandom(32)
    c.sendall(struct.pack(">II", MAGIC, 2) + my)
    hh = read_exact(c, 72, 5)
    c.sendall(struct.pack(">I", MAGIC) + mac(key, "dljob ring proof", hh[8:40], my,
                                             [rank - 1, size], b"", jobkey))
    say("in the ring")
    # The star exchanges world_check does first: who is where, a broadcast.
    ident = struct.pack("=iiii", rank, size, rank, size) + node
    s.sendall(struct.pack(">II", 4, len(ident)) + ident)
    read_msg(s, 5)
    blob = b"blob from rank 2".ljust(48, b"\0")
    s.sendall(struct.pack(">II", 4, len(blob)) + blob)
    read_msg(s, 5)
    say("trickling one byte every %g s" % a.trickle)
    c.setblocking(False)
    while True:
        try:
            c.recv(65536)
        except OSError:
            pass
        r0.send(b"\0")
        time.sleep(a.trickle)


def listener(port):
    ls = socket.socket()
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    return ls


def mode_rogue0(a):
    ls = listener(a.port)
    say("listening on", a.port)
    conns = []
    while True:
        c, _ = ls.accept()
        conns.append(c)
        c.sendall(struct.pack(">II", MAGIC, 1) + os.urandom(32))
        h = read_exact(c, 144, 5)
        say("got a hello of %d bytes" % len(h))
        # A proof it cannot make, then a table pointing the ring at itself.
        c.sendall(struct.pack(">I", MAGIC) + os.urandom(32))
        say("sent a forged proof")


def mode_busy(a):
    import select
    lss = [listener(a.port + k) for k in range(a.count)]
    say("holding ports %d-%d" % (a.port, a.port + a.count - 1))
    conns = []
    while True:
        for ls in select.select(lss, [], [])[0]:
            c, _ = ls.accept()
            conns.append(c)
            if a.talk:
                c.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
            if a.greet:
                c.sendall(struct.pack(">II", MAGIC, 1) + os.urandom(32))


def mode_idle(a):
    conns = []
    until = time.monotonic() + 10
    for i in range(a.count):
        s = connect(a.host, a.port, until)
        if a.partial:
            s.sendall(struct.pack(">I", MAGIC) + b"\0" * 6)
        conns.append(s)
    say("holding %d %s connections" % (len(conns), "partial" if a.partial else "idle"))
    time.sleep(3600)


def listening_ports(pids):
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
    ports = set()
    for line in out.splitlines():
        if any("pid=%d," % p in line for p in pids):
            m = re.search(r":(\d+)\s", line.split()[3] + " ")
            if m:
                ports.add(int(m.group(1)))
    return ports


def mode_ringhijack(a):
    pids = [int(p) for p in a.pids.split(",")]
    seen, conns = set(), []
    until = time.monotonic() + a.seconds
    junk = struct.pack("=f", 1000.0) * 65536
    while time.monotonic() < until:
        for port in listening_ports(pids) - seen - {a.skip}:
            seen.add(port)
            try:  # one that says nothing at all
                conns.append(("idle", socket.create_connection(("127.0.0.1", port), timeout=1)))
            except OSError:
                pass
            for rank in range(a.size):
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=1)
                    s.setblocking(False)
                    # The old ring hello: the sender's rank, native order.
                    s.send(struct.pack("=i", rank) + junk)
                    conns.append(("talk", s))
                except OSError:
                    pass
            say("connected %d times to port %d" % (a.size, port))
        for kind, s in conns:
            try:
                if kind == "talk":
                    s.send(junk)
            except OSError:
                pass
        time.sleep(0.05)
    say("done")
    time.sleep(3600)


def mode_relay(a):
    import select
    ls = listener(a.port)
    say("relaying port %d to %d" % (a.port, a.to))
    peer = {}   # socket -> the other end
    down = {}   # upstream socket -> bytes from rank 0 seen so far (to parse)
    while True:
        for s in select.select([ls] + list(peer), [], [])[0]:
            if s is ls:
                c, _ = ls.accept()
                try:
                    u = connect("127.0.0.1", a.to, time.monotonic() + 5)
                except OSError:
                    c.close()
                    continue
                peer[c], peer[u] = u, c
                down[u] = b""
                say("a rank came: passing it on")
                continue
            try:
                b = s.recv(65536)
            except OSError:
                b = b""
            if not b:
                o = peer.pop(s)
                peer.pop(o, None)
                down.pop(s, None)
                down.pop(o, None)
                s.close()
                o.close()
                continue
            peer[s].sendall(b)
            if s in down:
                # From rank 0: greeting (40), proof (36), then messages.
                d = down[s] + b
                off = 76
                while len(d) >= off + 8:
                    t, n = struct.unpack(">II", d[off:off + 8])
                    if t == 2:
                        say("relayed a table from rank 0: in the middle of a rank's connection")
                    if len(d) < off + 8 + n:
                        break
                    d = d[:76] + d[off + 8 + n:]
                down[s] = d


def mode_ringflood(a):
    pids = [int(p) for p in a.pids.split(",")]
    held, made = {}, 0
    until = time.monotonic() + a.seconds
    next_look = 0
    while time.monotonic() < until:
        if time.monotonic() >= next_look:
            for port in listening_ports(pids) - set(held) - {a.skip}:
                held[port] = []
                say("flooding port", port)
            next_look = time.monotonic() + 0.2
        for port, conns in held.items():
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            conns.append(s)
            made += 1
            while len(conns) > a.hold:
                conns.pop(0).close()
    say("made %d connections" % made)
    time.sleep(3600)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    h = sub.add_parser("hello")
    h.add_argument("host")
    h.add_argument("port", type=int)
    h.add_argument("--rank", type=int, required=True)
    h.add_argument("--size", type=int, required=True)
    h.add_argument("--secret")
    h.add_argument("--after-table")
    r = sub.add_parser("rogue0")
    r.add_argument("port", type=int)
    b = sub.add_parser("busy")
    b.add_argument("port", type=int)
    b.add_argument("--talk", action="store_true")
    b.add_argument("--greet", action="store_true")
    b.add_argument("--count", type=int, default=1)
    i = sub.add_parser("idle")
    i.add_argument("host")
    i.add_argument("port", type=int)
    i.add_argument("--count", type=int, default=10)
    i.add_argument("--partial", action="store_true")
    m = sub.add_parser("member")
    m.add_argument("host")
    m.add_argument("port", type=int)
    m.add_argument("--secret", required=True)
    m.add_argument("--trickle", type=float, default=1.5)
    j = sub.add_parser("ringhijack")
    j.add_argument("--pids", required=True)
    j.add_argument("--skip", type=int, default=0)
    j.add_argument("--size", type=int, required=True)
    j.add_argument("--seconds", type=float, default=4)
    y = sub.add_parser("relay")
    y.add_argument("port", type=int)
    y.add_argument("--to", type=int, required=True)
    f = sub.add_parser("ringflood")
    f.add_argument("--pids", required=True)
    f.add_argument("--skip", type=int, default=0)
    f.add_argument("--seconds", type=float, default=4)
    f.add_argument("--hold", type=int, default=64)
    a = p.parse_args()
    return {"hello": mode_hello, "rogue0": mode_rogue0, "busy": mode_busy,
            "idle": mode_idle, "ringhijack": mode_ringhijack, "member": mode_member,
            "ringflood": mode_ringflood, "relay": mode_relay}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
