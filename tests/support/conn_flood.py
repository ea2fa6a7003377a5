#!/usr/bin/env python3
"""Strangers' connections and bodies against a gateway, for refgate's limit tests.

Raw HTTP over loopback sockets (never git), every mode bounded in sockets and
time and stopping by itself:

  hold --count N --ready FILE --seconds S
      open N connections that send nothing; write N to FILE once all are
      connected, then hold them until S seconds pass or SIGTERM; print
      "open=X closed=Y" (closed: the gateway hung up).
  trickle --path P --interval I --seconds S
      send a request's headers one byte every I seconds; print how many
      seconds passed until the gateway hung up ("cut=12.3"), or "open" if
      it had not after S seconds.
  evict --count N --settle S
      open N connections one after another (nothing sent), wait up to S
      seconds for the gateway to settle, print the indexes it closed
      ("closed=0,1,2").
  post --path P [--token T] [--ctype C] [--gzip-zeros N | --body-bytes N]
       [--hold-ready FILE --seconds S]
      POST a body (N zeros gzipped as one gzip member, or N bytes of
      noise); with --hold-ready, send only the body given, write FILE and
      hold the request open (no end) until S seconds or SIGTERM, else end
      the body and print "status=CODE" and the response body.
  spooled --pid PID --dir D --at-least N --seconds S
      wait until PID holds at least N bytes under D (as watch-spool counts
      them); exit 1 if it does not within S seconds.
  watch-spool --pid PID --dir D --out FILE --seconds S
      poll every 20 ms the bytes PID holds open under D (spool files, named
      or O_TMPFILE) plus the bytes stored under D; write the largest sum
      seen to FILE when SIGTERM comes or S seconds pass; FILE.ready appears
      once it watches.
"""
import argparse
import base64
import os
import resource
import select
import signal
import socket
import sys
import time
import zlib

STOP = False


def on_term(signum, frame):
    global STOP
    STOP = True


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setblocking(False)
    return s


def hung_up(s):
    """True when the peer closed or reset the connection (never blocks)."""
    try:
        p = select.poll()  # select() cannot watch descriptors past 1023
        p.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
        if not p.poll(0):
            return False
        data = s.recv(65536)
        return data == b""  # a response before the close is still "open"
    except BlockingIOError:
        return False
    except OSError:
        return True


def sleep_until(deadline, step=0.05):
    while not STOP and time.monotonic() < deadline:
        time.sleep(min(step, max(0.0, deadline - time.monotonic())))


def cmd_hold(a):
    socks = [connect(a.port) for _ in range(a.count)]
    with open(a.ready + ".tmp", "w") as f:
        f.write("%d\n" % len(socks))
    os.rename(a.ready + ".tmp", a.ready)
    sleep_until(time.monotonic() + a.seconds, 0.2)
    closed = sum(1 for s in socks if hung_up(s))
    print("open=%d closed=%d" % (len(socks) - closed, closed))


def cmd_trickle(a):
    s = connect(a.port)
    head = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: trickle/1.0\r\n"
            "X-Padding: %s\r\n\r\n" % (a.path, "x" * 200)).encode()
    start = time.monotonic()
    for i in range(len(head)):
        if time.monotonic() - start > a.seconds:
            break
        try:
            s.send(head[i:i + 1])
        except OSError:
            print("cut=%.1f" % (time.monotonic() - start))
            return
        end = time.monotonic() + a.interval
        while time.monotonic() < end:
            if hung_up(s):
                print("cut=%.1f" % (time.monotonic() - start))
                return
            time.sleep(0.05)
    print("open")


def cmd_evict(a):
    socks = []
    for _ in range(a.count):
        socks.append(connect(a.port))
        # In order: the gateway must see them arrive oldest first.
        time.sleep(0.05)
    deadline = time.monotonic() + a.settle
    closed = set()
    while time.monotonic() < deadline:
        closed |= {i for i, s in enumerate(socks) if i not in closed and hung_up(s)}
        if len(closed) >= a.expect:
            break
        time.sleep(0.05)
    print("closed=" + ",".join(str(i) for i in sorted(closed)))


def cmd_post(a):
    headers = ["POST %s HTTP/1.1" % a.path, "Host: 127.0.0.1", "Content-Type: " + a.ctype]
    if a.token:
        cred = base64.b64encode(("run:" + a.token).encode()).decode()
        headers.append("Authorization: Basic " + cred)
    if a.gzip_zeros:
        body = a.prefix.encode().decode("unicode_escape").encode("latin-1")
        z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        gz = z.compress(body)
        block = b"\0" * (1 << 20)
        n = a.gzip_zeros
        while n > 0:
            k = min(n, len(block))
            gz += z.compress(block[:k])
            n -= k
        body = gz + z.flush()
        headers.append("Content-Encoding: gzip")
    else:
        body = os.urandom(a.body_bytes)
    if a.hold_ready:
        headers.append("Transfer-Encoding: chunked")
    else:
        headers.append("Content-Length: %d" % len(body))
    s = socket.create_connection(("127.0.0.1", a.port), timeout=60)
    s.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
    if a.hold_ready:
        if body:
            s.sendall(b"%x\r\n" % len(body) + body + b"\r\n")
        with open(a.hold_ready + ".tmp", "w") as f:
            f.write("sent %d\n" % len(body))
        os.rename(a.hold_ready + ".tmp", a.hold_ready)
        s.setblocking(False)
        deadline = time.monotonic() + a.seconds
        while not STOP and time.monotonic() < deadline:
            if hung_up(s):
                print("hung up")
                return
            time.sleep(0.1)
        print("held")
        return
    try:
        s.sendall(body)
    except OSError as e:
        # The gateway may answer and close before it has read everything.
        print("send stopped: %s" % e, file=sys.stderr)
    resp = b""
    s.settimeout(60)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            resp += d
            if b"\r\n\r\n" in resp:
                head, _, rest = resp.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        if len(rest) >= int(line.split(b":")[1]):
                            raise StopIteration
    except (StopIteration, socket.timeout, ConnectionResetError):
        pass
    status = resp.split(b" ", 2)[1].decode() if resp.startswith(b"HTTP/") else "none"
    print("status=%s" % status)
    sys.stdout.write(resp.partition(b"\r\n\r\n")[2].decode("utf-8", "replace"))


def held_bytes(pid, d):
    total = 0
    fddir = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(fddir)
    except OSError:
        return 0
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fddir, fd))
            if target.startswith(d + "/"):
                total += os.stat(os.path.join(fddir, fd)).st_size
        except OSError:
            pass
    for root, _, files in os.walk(d):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def cmd_watch_spool(a):
    d = os.path.realpath(a.dir)
    most = held_bytes(a.pid, d)
    write_atomic(a.out + ".ready", "watching\n")  # the caller may start now
    deadline = time.monotonic() + a.seconds
    while not STOP and time.monotonic() < deadline:
        most = max(most, held_bytes(a.pid, d))
        time.sleep(0.02)
    write_atomic(a.out, "%d\n" % most)


def cmd_spooled(a):
    deadline = time.monotonic() + a.seconds
    d = os.path.realpath(a.dir)
    while time.monotonic() < deadline:
        if held_bytes(a.pid, d) >= a.at_least:
            return
        time.sleep(0.05)
    sys.exit("spooled: %d bytes after %gs" % (held_bytes(a.pid, d), a.seconds))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("hold", "trickle", "evict", "post"):
        sp = sub.add_parser(name)
        sp.add_argument("--port", type=int, required=True)
        sp.add_argument("--seconds", type=float, default=30)
        if name == "hold":
            sp.add_argument("--count", type=int, required=True)
            sp.add_argument("--ready", required=True)
        if name == "trickle":
            sp.add_argument("--path", default="/local/acme/app.git/info/refs")
            sp.add_argument("--interval", type=float, default=1.0)
        if name == "evict":
            sp.add_argument("--count", type=int, required=True)
            sp.add_argument("--expect", type=int, default=1 << 30)
            sp.add_argument("--settle", type=float, default=3)
        if name == "post":
            sp.add_argument("--path", required=True)
            sp.add_argument("--token")
            sp.add_argument("--ctype", default="application/x-git-receive-pack-request")
            sp.add_argument("--gzip-zeros", type=int, default=0)
            sp.add_argument("--prefix", default="", help="plain bytes before the zeros "
                            "(backslash escapes allowed), e.g. a command list")
            sp.add_argument("--body-bytes", type=int, default=0)
            sp.add_argument("--hold-ready")
    sp = sub.add_parser("watch-spool")
    sp.add_argument("--pid", type=int, required=True)
    sp.add_argument("--dir", required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--seconds", type=float, default=60)
    sp = sub.add_parser("spooled")
    sp.add_argument("--pid", type=int, required=True)
    sp.add_argument("--dir", required=True)
    sp.add_argument("--at-least", type=int, required=True)
    sp.add_argument("--seconds", type=float, default=30)
    a = p.parse_args()
    # Thousands of sockets: as many descriptors as this process may have.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, on_term)
    {"hold": cmd_hold, "trickle": cmd_trickle, "evict": cmd_evict, "post": cmd_post,
     "watch-spool": cmd_watch_spool, "spooled": cmd_spooled}[a.mode](a)


if __name__ == "__main__":
    main()
