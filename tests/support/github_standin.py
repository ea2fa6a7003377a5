#!/usr/bin/env python3
"""A local stand-in for the parts of GitHub's REST API a GitHub App uses.

Tests start it on 127.0.0.1 with a free port (written to --port-file) to
prove refgate's github-app credentials against what GitHub actually checks,
not against what refgate believes it sends:

  * every app call carries `Authorization: Bearer <JWT>`; the JWT's RS256
    signature verifies against the App's public key (with the `openssl`
    CLI), `iss` is the App id, `iat`/`exp` are present, `exp - iat` is at
    most 600 s, `exp` is in the future and `iat` is not (60 s skew allowed);
  * an access-token request names repositories the installation has and
    permissions among contents:read|write and workflows:write;
  * a User-Agent header is present (GitHub refuses requests without one).

Endpoints:
  GET    /repos/{owner}/{repo}/installation       -> 200 {"id": N} | 404
  POST   /app/installations/{id}/access_tokens    -> 201 {"token", "expires_at", ...}
  DELETE /installation/token  (Authorization: token|Bearer <installation token>) -> 204
  GET    /_auth   for nginx auth_request: Authorization (Basic) + X-Original-URI
                  -> 204 allowed, 401 no/bad credentials, 403 not for this repo/access
  GET    /_state  -> {"tokens": [{"sha256", "repos", "permissions", "revoked",
                      "installation"}], "log": [{"method", "path", "status", ...}]}

Raw tokens never appear in /_state or in the log; tests that must look for
them (to prove they leak nowhere) read --tokens-file, one token per line.

Only the Python standard library and the openssl CLI are used.
"""

import argparse
import base64
import binascii
import datetime
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SKEW = 60
JWT_MAX_LIFETIME = 600
ALLOWED_PERMISSIONS = {
    "contents": {"read", "write"},
    "workflows": {"write"},
    "metadata": {"read"},
}
SERVICE_SUFFIXES = ("/info/refs", "/git-upload-pack", "/git-receive-pack", "/HEAD", "/objects/")


class State:
    """Everything the stand-in remembers, behind one lock."""

    def __init__(self, args):
        self.lock = threading.Lock()
        self.app_id = str(args.app_id)
        self.public_key = args.public_key
        self.installations = {}  # id -> set of "owner/name"
        for spec in args.installation:
            ident, _, repos = spec.partition("=")
            self.installations[int(ident)] = {r for r in repos.split(",") if r}
        self.statics = []  # (user, password, repo, write)
        for spec in args.static:
            parts = spec.split(":")
            if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "write"):
                sys.exit("--static wants USER:PASSWORD:owner/repo[:write], got %r" % spec)
            self.statics.append((parts[0], parts[1], parts[2], len(parts) == 4))
        self.tokens = {}  # raw token -> record
        self.order = []  # raw tokens in issue order
        self.log = []
        self.tokens_file = args.tokens_file
        self.token_length = args.token_length
        self.rate_limit_pending = args.rate_limit_once
        self.rate_limit_seconds = args.rate_limit_seconds
        self.fail_tokens = args.fail_tokens

    def issue(self, installation, repos, permissions):
        # "ghs_" and dot-separated url-safe chunks up to the wanted length,
        # like GitHub's newer stateless tokens: long, and not just [A-Za-z0-9_].
        body = ""
        while len(body) < self.token_length - 4:
            body += ("." if body else "") + secrets.token_urlsafe(48)
        token = "ghs_" + body[: self.token_length - 4].rstrip(".")
        with self.lock:
            self.tokens[token] = {
                "sha256": hashlib.sha256(token.encode()).hexdigest(),
                "installation": installation,
                "repos": sorted(repos),
                "permissions": permissions,
                "revoked": False,
            }
            self.order.append(token)
            if self.tokens_file:
                with open(self.tokens_file, "a") as f:
                    f.write(token + "\n")
        return token


def b64url_decode(s):
    if not re.fullmatch(r"[A-Za-z0-9_-]*", s):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def rs256_verify(public_key, data, signature):
    """True when `signature` is an RS256 signature of `data` by the key."""
    with tempfile.TemporaryDirectory(prefix="standin-") as d:
        dpath, spath = os.path.join(d, "data"), os.path.join(d, "sig")
        with open(dpath, "wb") as f:
            f.write(data)
        with open(spath, "wb") as f:
            f.write(signature)
        r = subprocess.run(
            ["openssl", "dgst", "-sha256", "-verify", public_key, "-signature", spath, dpath],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return r.returncode == 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "github-standin"
    state = None  # set in main

    # -- plumbing --------------------------------------------------------

    def log_message(self, fmt, *args):
        pass  # the request log lives in /_state; stderr stays quiet

    def answer(self, status, obj=None, headers=None, extra=None):
        # Logged before answering, so a client that reads /_state right
        # after its answer always finds its request there.
        entry = {"method": self.command, "path": self.path.split("?")[0], "status": status}
        if extra:
            entry.update(extra)
        with self.state.lock:
            self.state.log.append(entry)
        body = b"" if obj is None or status == 204 else json.dumps(obj).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        if status != 204:
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def check_app_jwt(self):
        """None when the request carries a JWT GitHub would accept, else
        (status, message) to answer with."""
        if not self.headers.get("User-Agent"):
            return 403, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header"
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return 401, "A JSON web token could not be decoded"
        jwt = auth[len("Bearer "):]
        parts = jwt.split(".")
        if len(parts) != 3:
            return 401, "A JSON web token could not be decoded"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return 401, "A JSON web token could not be decoded"
        if not isinstance(header, dict) or header.get("alg") != "RS256":
            return 401, "A JSON web token could not be decoded"
        if not rs256_verify(self.state.public_key, (parts[0] + "." + parts[1]).encode(), signature):
            return 401, "A JSON web token could not be decoded"
        if not isinstance(claims, dict) or str(claims.get("iss")) != self.state.app_id:
            return 401, "'Issuer' claim ('iss') must be an Integer"
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return 401, "'Issued at' and 'Expiration time' claims must be numeric"
        now = int(time.time())
        if exp - iat > JWT_MAX_LIFETIME:
            return 401, "'Expiration time' claim ('exp') is too far in the future"
        if exp <= now:
            return 401, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
        if iat > now + SKEW:
            return 401, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
        return None

    # -- routes ----------------------------------------------------------

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/_state":
            return self.get_state()
        if path == "/_auth":
            return self.get_auth()
        m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/installation", path)
        if m:
            return self.get_installation(m.group(1) + "/" + m.group(2))
        self.answer(404, {"message": "Not Found"})

    def do_POST(self):
        body = self.read_body()
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/app/installations/(\d+)/access_tokens", path)
        if m:
            return self.post_access_tokens(int(m.group(1)), body)
        self.answer(404, {"message": "Not Found"})

    def do_DELETE(self):
        self.read_body()
        if self.path.split("?")[0] == "/installation/token":
            return self.delete_token()
        self.answer(404, {"message": "Not Found"})

    def get_state(self):
        st = self.state
        with st.lock:
            out = {
                "tokens": [dict(st.tokens[t]) for t in st.order],
                "log": list(st.log),
            }
        body = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def get_installation(self, repo):
        bad = self.check_app_jwt()
        if bad:
            return self.answer(bad[0], {"message": bad[1]})
        for ident, repos in sorted(self.state.installations.items()):
            if repo in repos:
                owner = repo.split("/")[0]
                return self.answer(200, {"id": ident, "app_id": int(self.state.app_id),
                                         "account": {"login": owner}})
        self.answer(404, {"message": "Not Found"})

    def post_access_tokens(self, installation, body):
        st = self.state
        bad = self.check_app_jwt()
        if bad:
            return self.answer(bad[0], {"message": bad[1]})
        if installation not in st.installations:
            return self.answer(404, {"message": "Not Found"})
        with st.lock:
            limited = st.rate_limit_pending
            st.rate_limit_pending = False
        if limited:
            reset = int(time.time()) + st.rate_limit_seconds
            return self.answer(
                403,
                {"message": "API rate limit exceeded for installation ID %d." % installation},
                {"x-ratelimit-limit": 5000, "x-ratelimit-remaining": 0,
                 "x-ratelimit-used": 5000, "x-ratelimit-reset": reset},
            )
        if st.fail_tokens:
            return self.answer(st.fail_tokens, {"message": "Stand-in failure on purpose"})
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.answer(400, {"message": "Problems parsing JSON"})
        if not isinstance(req, dict):
            return self.answer(400, {"message": "Problems parsing JSON"})
        have = st.installations[installation]
        names = req.get("repositories")
        if names is None:
            repos = set(have)
        else:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return self.answer(422, {"message": "Invalid request: repositories"})
            repos = set()
            for n in names:
                # GitHub takes bare names within the installation's account.
                match = [r for r in have if r.split("/", 1)[1] == n]
                if "/" in n or not match:
                    return self.answer(422, {"message": "There is at least one repository that "
                                             "does not exist or is not accessible to the parent "
                                             "installation."})
                repos.update(match)
        perms = req.get("permissions")
        if perms is None:
            perms = {"contents": "write", "workflows": "write", "metadata": "read"}
        if not isinstance(perms, dict):
            return self.answer(422, {"message": "Invalid request: permissions"})
        for k, v in perms.items():
            if k not in ALLOWED_PERMISSIONS or v not in ALLOWED_PERMISSIONS[k]:
                return self.answer(422, {"message": "The permissions requested are not granted "
                                         "to this installation."})
        token = st.issue(installation, repos, perms)
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        self.answer(
            201,
            {"token": token, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
             "permissions": perms, "repository_selection": "selected",
             "repositories": [{"name": r.split("/", 1)[1], "full_name": r} for r in sorted(repos)]},
            extra={"installation": installation},
        )

    def delete_token(self):
        st = self.state
        auth = self.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return self.answer(401, {"message": "Bad credentials"})
        with st.lock:
            rec = st.tokens.get(token)
            ok = rec is not None and not rec["revoked"]
            if ok:
                rec["revoked"] = True
        if not ok:
            return self.answer(401, {"message": "Bad credentials"})
        self.answer(204)

    def get_auth(self):
        """auth_request for the test git server: may these Basic
        credentials do what X-Original-URI asks?"""
        st = self.state
        uri = self.headers.get("X-Original-URI", "")
        path, _, query = uri.partition("?")
        write = path.endswith("/git-receive-pack") or \
            "git-receive-pack" in urllib.parse.parse_qs(query).get("service", [])
        repo_part = path
        for suffix in SERVICE_SUFFIXES:
            i = path.find(suffix)
            if i >= 0:
                repo_part = path[:i]
                break
        if repo_part.endswith(".git"):
            repo_part = repo_part[:-4]
        segs = [s for s in repo_part.split("/") if s]
        repo = "/".join(segs[-2:]) if len(segs) >= 2 else ""
        extra = {"uri": uri, "repo": repo, "write": write}
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return self.answer(401, None, {"WWW-Authenticate": 'Basic realm="standin"'}, extra)
        try:
            user, sep, password = base64.b64decode(auth[6:], validate=True).decode().partition(":")
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return self.answer(401, None, None, extra)
        if not sep:
            return self.answer(401, None, None, extra)
        with st.lock:
            rec = st.tokens.get(password)
            rec = dict(rec) if rec else None
        if rec is not None:
            extra["token"] = rec["sha256"][:12]
            # GitHub documents x-access-token as the user for installation tokens.
            if rec["revoked"] or user != "x-access-token":
                return self.answer(401, None, None, extra)
            if repo not in rec["repos"]:
                return self.answer(403, None, None, extra)
            level = rec["permissions"].get("contents")
            if level not in ("read", "write") or (write and level != "write"):
                return self.answer(403, None, None, extra)
            return self.answer(204, None, None, extra)
        for s_user, s_pass, s_repo, s_write in st.statics:
            if secrets.compare_digest(user, s_user) and secrets.compare_digest(password, s_pass):
                extra["static"] = s_user
                if repo != s_repo or (write and not s_write):
                    return self.answer(403, None, None, extra)
                return self.answer(204, None, None, extra)
        self.answer(401, None, None, extra)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port-file", required=True, help="write the listening port here")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--app-id", type=int, required=True)
    p.add_argument("--public-key", required=True, help="the App's public key (PEM)")
    p.add_argument("--installation", action="append", default=[], metavar="ID=owner/repo,...",
                   help="an installation and the repositories it covers (repeatable)")
    p.add_argument("--static", action="append", default=[], metavar="USER:PASSWORD:owner/repo[:write]",
                   help="static credentials /_auth accepts (repeatable)")
    p.add_argument("--tokens-file", help="append every issued raw token here, one per line")
    p.add_argument("--token-length", type=int, default=520, help="length of issued tokens")
    p.add_argument("--rate-limit-once", action="store_true",
                   help="answer the first access_tokens call with a primary rate limit")
    p.add_argument("--rate-limit-seconds", type=int, default=2,
                   help="x-ratelimit-reset is now plus this many seconds")
    p.add_argument("--fail-tokens", type=int, default=0, metavar="STATUS",
                   help="answer every access_tokens call with this HTTP status")
    args = p.parse_args()
    if args.token_length < 8:
        p.error("--token-length must be at least 8")
    if not os.path.exists(args.public_key):
        p.error("--public-key %s does not exist" % args.public_key)

    Handler.state = State(args)
    server = ThreadingHTTPServer((args.host, 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
