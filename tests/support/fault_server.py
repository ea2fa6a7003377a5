#!/usr/bin/env python3
"""A smart-HTTP git upstream that fails on purpose, for refgate's fault tests.

It answers `GET <repo>.git/info/refs?service=...` truthfully (git's own
`--advertise-refs` on the bare repository under --root), so a push gets as
far as forwarding, and then misbehaves on the POST as --mode says:

  500       answer HTTP 500 without reading the body
  reset     read 64 KiB of the body (or all of a shorter one), then reset the
            connection (RST)
  slow      read nothing and answer nothing, holding the connection open
  redirect  answer every request with 302 to http://elsewhere.invalid/...
  down      after the first advertisement, stop listening (connection refused)

Usage: fault_server.py --mode MODE --root DIR --port-file FILE [--log FILE]
The chosen port is written to --port-file once it listens.
"""
import argparse
import http.server
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.parse


def pkt(line):
    data = line.encode()
    return b"%04x" % (len(data) + 4) + data


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if self.server.log:
            with open(self.server.log, "a") as f:
                f.write("%s %s\n" % (self.server.mode, fmt % args))

    def redirect(self):
        self.send_response(302)
        self.send_header("Location", "http://elsewhere.invalid" + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.server.mode == "redirect":
            return self.redirect()
        url = urllib.parse.urlsplit(self.path)
        service = urllib.parse.parse_qs(url.query).get("service", [""])[0]
        if not url.path.endswith("/info/refs") or service not in (
                "git-receive-pack", "git-upload-pack"):
            self.send_error(404)
            return
        repo = self.server.root + url.path[: -len("/info/refs")]
        out = subprocess.run(
            ["git", service[4:], "--stateless-rpc", "--advertise-refs", repo],
            capture_output=True, check=True).stdout
        body = pkt("# service=%s\n" % service).decode() + "0000"
        body = body.encode() + out
        if self.server.mode == "down":
            # Stop listening before answering, so the push's POST that
            # follows finds nothing there (connection refused).
            # shutdown() first: on Linux it stops the listening socket at
            # once, even while the serving loop still polls it.
            self.server.down = True
            self.server.socket.shutdown(socket.SHUT_RDWR)
            self.server.socket.close()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-%s-advertisement" % service)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_POST(self):
        mode = self.server.mode
        if mode == "redirect":
            return self.redirect()
        if mode == "500":
            body = b"upstream is having a bad day\n"
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return
        if mode == "reset":
            got = 0
            length = self.headers.get("Content-Length")
            want = min(65536, int(length)) if length is not None else 65536
            while got < want:
                chunk = self.rfile.read1(want - got)
                if not chunk:
                    break
                got += len(chunk)
            # SO_LINGER 0: close sends RST rather than FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        # slow (and anything else): say nothing for a long time.
        time.sleep(3600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True,
                    choices=["500", "reset", "slow", "redirect", "down"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    args = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.mode, srv.root, srv.log = args.mode, args.root, args.log
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.down = False
    srv.timeout = 0.2
    while not srv.down:
        try:
            srv.handle_request()
        except (OSError, ValueError):
            pass  # the listening socket was closed under the loop ("down")
    # The process stays until killed, so the port is not reused meanwhile.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
