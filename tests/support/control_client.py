#!/usr/bin/env python3
"""Talk to a refgate control socket the way a test needs to.

control_client.py SOCKET [LINE...]: connect, send each LINE (a newline is
added) and print each answer line; with no LINE, send stdin as it is and
print whatever comes back until the gateway closes the connection.
Exit status 3 when the connection is refused or the socket is missing.
"""
import socket
import sys


def main():
    path = sys.argv[1]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    try:
        s.connect(path)
    except OSError as e:
        print(f"connect: {e}", file=sys.stderr)
        return 3
    f = s.makefile("rwb")
    if len(sys.argv) > 2:
        for line in sys.argv[2:]:
            try:
                f.write(line.encode() + b"\n")
                f.flush()
            except OSError:
                pass  # refused or closed: what it said before closing is still there
            answer = f.readline()
            sys.stdout.write(answer.decode(errors="replace"))
            if not answer:
                break
    else:
        data = sys.stdin.buffer.read()
        try:
            s.sendall(data)
        except OSError as e:
            print(f"send: {e}", file=sys.stderr)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                sys.stdout.write(chunk.decode(errors="replace"))
        except OSError as e:
            print(f"recv: {e}", file=sys.stderr)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
