#!/usr/bin/env python3
"""A raw receive-pack client for attacking the gateway over the wire.

git's own client never sends what an attacker would (zero/zero commands, a
request that ends after the pack, a gzip body with its trailer cut, junk
after the pack), so the tests use this instead: it builds the pkt-line
command list and the pack itself and speaks HTTP/1.1 on a raw socket.

    rawpush.py URL TOKEN [options] OLD:NEW:REF...

Prints `HTTP <status>`, then the answer: report lines (`ok ...`/`ng ...`,
side-band demultiplexed), band-2 lines as `remote: ...`, `keepalive` for
each empty band-1 packet, or the body of an error. Exit status 0 whenever an answer (any status) was read, 3 when the
gateway closed the connection without one, 4 after --hangup-when.
"""
import argparse
import base64
import hashlib
import gzip
import socket
import subprocess
import sys
import time
import urllib.parse


def pkt(data):
    if isinstance(data, str):
        data = data.encode()
    return b"%04x" % (len(data) + 4) + data


def command_list(cmds, caps):
    out = b""
    for i, c in enumerate(cmds):
        old, new, ref = c.split(":", 2)
        line = ("%s %s %s" % (old, new, ref)).encode()
        if i == 0 and caps:
            line += b"\0 " + caps.encode()
        out += pkt(line)
    return out + b"0000"


def make_pack(repo, revs):
    """A pack of the objects `revs` (git rev-list syntax) brings."""
    return subprocess.run(
        ["git", "-C", repo, "pack-objects", "--stdout", "--revs", "-q"],
        input=("\n".join(revs.split()) + "\n").encode(), capture_output=True, check=True,
    ).stdout


def empty_pack(hexlen):
    body = b"PACK" + (2).to_bytes(4, "big") + (0).to_bytes(4, "big")
    h = hashlib.sha256 if hexlen == 64 else hashlib.sha1
    return body + h(body).digest()


def read_answer(sock, deadline):
    """Read a whole HTTP/1.1 response (Content-Length or chunked)."""
    buf = b""
    sock.settimeout(max(0.1, deadline - time.time()))
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, None
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()

    def more():
        d = sock.recv(65536)
        if not d:
            raise EOFError
        return d

    body = b""
    try:
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                while b"\r\n" not in rest:
                    rest += more()
                size_line, rest = rest.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(rest) < size + 2:
                    rest += more()
                body += rest[:size]
                rest = rest[size + 2:]
                if size == 0:
                    break
        elif "content-length" in hdrs:
            n = int(hdrs["content-length"])
            while len(rest) < n:
                rest += more()
            body = rest[:n]
        else:
            try:
                while True:
                    rest += more()
            except EOFError:
                pass
            body = rest
    except EOFError:
        pass
    return status, body


def pktlines(data):
    i = 0
    while i + 4 <= len(data):
        n = int(data[i:i + 4], 16)
        if n < 4:
            yield None
            i += 4
            continue
        yield data[i + 4:i + n]
        i += n


def print_answer(status, body, sideband):
    print("HTTP %d" % status)
    if status != 200:
        sys.stdout.write(body.decode("utf-8", "replace"))
        return
    report = body
    if sideband:
        report = b""
        for p in pktlines(body):
            if p is None or not p:
                continue
            if p == b"\x01":
                print("keepalive")  # an empty band-1 packet, as receive-pack sends
            elif p[0] == 1:
                report += p[1:]
            elif p[0] in (2, 3):
                for l in p[1:].decode("utf-8", "replace").splitlines():
                    print("remote: " + l)
    for p in pktlines(report):
        if p:
            print(p.decode("utf-8", "replace").rstrip("\n"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url", help="the repository URL on the gateway, ending in .git")
    ap.add_argument("token")
    ap.add_argument("cmds", nargs="+", help="OLD:NEW:REF")
    ap.add_argument("--caps", default="report-status side-band-64k agent=rawpush")
    ap.add_argument("--pack-repo", help="build the pack in this repository")
    ap.add_argument("--pack-revs", help='revisions for pack-objects, e.g. "NEW ^OLD"')
    ap.add_argument("--empty-pack", type=int, metavar="HEXLEN", help="send an empty pack")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--cut", type=int, default=0, help="drop the body's last N bytes")
    ap.add_argument("--junk", default="", help="append these bytes after the body")
    ap.add_argument("--junk-bytes", type=int, default=0, help="append N bytes of junk")
    ap.add_argument("--chunked", action="store_true")
    ap.add_argument("--hangup-when", metavar="CMD",
                    help="send the body without ending the request, then close the "
                         "connection once CMD (a shell command) succeeds")
    ap.add_argument("--send-first", type=int, metavar="N",
                    help="with --hangup-when: send only the first N bytes of the body")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()

    body = command_list(a.cmds, a.caps)
    if a.pack_repo:
        body += make_pack(a.pack_repo, a.pack_revs)
    elif a.empty_pack:
        body += empty_pack(a.empty_pack)
    if a.gzip:
        body = gzip.compress(body)
    if a.cut:
        body = body[:-a.cut]
    body += a.junk.encode() + b"x" * a.junk_bytes

    u = urllib.parse.urlsplit(a.url)
    path = u.path + "/git-receive-pack"
    auth = base64.b64encode(("run:" + a.token).encode()).decode()
    head = ("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\n"
            "Content-Type: application/x-git-receive-pack-request\r\n"
            "Accept: application/x-git-receive-pack-result\r\n" % (path, u.netloc, auth))
    if a.gzip:
        head += "Content-Encoding: gzip\r\n"
    if a.send_first is not None:
        body = body[:a.send_first]
    if a.chunked or a.hangup_when:
        head += "Transfer-Encoding: chunked\r\n\r\n"
        payload = b"%x\r\n" % len(body) + body + b"\r\n"
        if not a.hangup_when:
            payload += b"0\r\n\r\n"
    else:
        head += "Content-Length: %d\r\n\r\n" % len(body)
        payload = body
    deadline = time.time() + a.timeout
    sock = socket.create_connection((u.hostname, u.port), timeout=a.timeout)
    try:
        sock.sendall(head.encode() + payload)
    except ConnectionError:
        pass
    if a.hangup_when:
        while time.time() < deadline:
            if subprocess.run(a.hangup_when, shell=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            print("rawpush: --hangup-when never held", file=sys.stderr)
        sock.close()
        return 4
    try:
        status, answer = read_answer(sock, deadline)
    except (socket.timeout, ConnectionError):
        status, answer = None, None
    if status is None:
        print("rawpush: no answer")
        return 3
    print_answer(status, answer, "side-band" in a.caps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
