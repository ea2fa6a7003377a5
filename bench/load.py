#!/usr/bin/env python3
"""Load against a running gateway: many concurrent git clients pushing
allowed and denied refs of 10 KB to 10 MB for a bounded time, then every
decision checked against what upstream holds and the audit log.

    load.py --gateway URL --tokens FILE --upstream DIR --state DIR
            --refgate BIN --config FILE [--clients 64] [--seconds 30]

Each client holds its own run token (one a line in FILE) and works in its own clone of DIR/acme/app.git and loops over four
kinds of push, chosen at random:
  create  a new feature branch          (allowed: lands)
  ff      a fast-forward of its branch  (allowed: checked for ancestry)
  force   a rewrite of its branch       (denied: the rules allow no force)
  main    an update of main             (denied: main is protected)
A wrong decision is a push whose result (landed or rejected with a
`policy:` reason) differs from that. Prints pushes/s, latency p50/p99, the
gateway's peak RSS, and exits 1 on any wrong decision, an unaudited ref
update, a gap in seq or a chain that does not verify.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

KB = 1024


def git(*args, cwd=None, env=None, check=True):
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=check)


class Client(threading.Thread):
    def __init__(self, n, a, env, deadline, results):
        super().__init__(daemon=True)
        self.n, self.a, self.env, self.deadline, self.results = n, a, env, deadline, results
        self.dir = os.path.join(a.work, "c%d" % n)
        self.branch = None
        self.rng = random.Random(n)

    def commit(self, size):
        path = os.path.join(self.dir, "f-%d.bin" % self.rng.randrange(1 << 30))
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        git("add", path, cwd=self.dir)
        git("commit", "-q", "-m", "load", cwd=self.dir)

    def push(self, kind, refspec, force=False):
        args = ["push", "--porcelain", "origin", refspec] + (["--force"] if force else [])
        t0 = time.monotonic()
        p = git(*args, cwd=self.dir, env=self.env, check=False)
        dt = time.monotonic() - t0
        landed = p.returncode == 0
        want = kind in ("create", "ff")
        policy = "policy:" in p.stdout + p.stderr
        wrong = landed != want or (not landed and not policy)
        self.results.append((kind, dt, wrong, p.stdout + p.stderr if wrong else ""))
        return landed

    def run(self):
        git("clone", "-q", "file://%s/acme/app.git" % self.a.upstream, self.dir)
        git("remote", "set-url", "origin", "%s/local/acme/app.git" % self.a.gateway, cwd=self.dir)
        while time.monotonic() < self.deadline:
            size = int(10 * KB * (1000 ** self.rng.random()))  # 10 KB .. 10 MB, log-uniform
            kind = self.rng.choice(["create", "ff", "force", "main"])
            if kind in ("ff", "force") and self.branch is None:
                kind = "create"
            if kind == "create":
                git("checkout", "-q", "-B", "work", "origin/main", cwd=self.dir)
                self.commit(size)
                name = "feature/c%d-%d" % (self.n, self.rng.randrange(1 << 30))
                if self.push(kind, "HEAD:refs/heads/" + name):
                    self.branch = name
            elif kind == "ff":
                self.commit(size)
                self.push(kind, "HEAD:refs/heads/" + self.branch)
            elif kind == "force":
                git("commit", "-q", "--amend", "-m", "rewritten", cwd=self.dir)
                self.push(kind, "HEAD:refs/heads/" + self.branch, force=True)
                # Back to what upstream holds, so the next ff is one.
                git("fetch", "-q", "origin", cwd=self.dir, env=self.env)
                git("reset", "-q", "--hard", "origin/" + self.branch, cwd=self.dir)
            else:
                git("checkout", "-q", "-B", "work", "origin/main", cwd=self.dir)
                self.commit(size)
                self.push(kind, "HEAD:refs/heads/main")
                git("reset", "-q", "--hard", "origin/" + self.branch if self.branch
                    else "origin/main", cwd=self.dir)


def peak_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def check_audit(a):
    """Every ref decision complete, seq contiguous, the chain verifies."""
    problems = []
    decisions, outcomes, last = {}, set(), 0
    with open(os.path.join(a.state, "audit.jsonl"), "rb") as f:
        for raw in f:
            rec = json.loads(raw)
            if rec["seq"] != last + 1:
                problems.append("seq %d after %d" % (rec["seq"], last))
            last = rec["seq"]
            if rec.get("type") == "decision":
                decisions[rec["seq"]] = rec
            elif rec.get("type") == "outcome":
                outcomes.add(rec["decision_seq"])
    for seq, d in decisions.items():
        if d.get("outcome") is None and seq not in outcomes:
            problems.append("decision %d (%s) never got its outcome" % (seq, d["ref"]))
    v = subprocess.run([a.refgate, "audit", "verify", "--config", a.config],
                       capture_output=True, text=True)
    if v.returncode != 0:
        problems.append("audit verify: " + v.stdout + v.stderr)
    return len(decisions), problems


def main():
    ap = argparse.ArgumentParser()
    for k in ("gateway", "tokens", "upstream", "state", "refgate", "config", "work"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--gateway-pid", type=int, required=True)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()

    with open(a.tokens) as f:
        tokens = f.read().split()
    if len(tokens) < a.clients:
        sys.exit("load.py: %d tokens for %d clients" % (len(tokens), a.clients))
    envs = []
    for i in range(a.clients):
        env = dict(os.environ)
        env.update({
            "REFGATE_TOKEN": tokens[i], "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "credential.helper",
            "GIT_CONFIG_VALUE_0": '!f() { echo username=load; echo "password=$REFGATE_TOKEN"; }; f',
        })
        envs.append(env)
    results = []
    start = time.monotonic()
    deadline = start + a.seconds
    clients = [Client(i, a, envs[i], deadline, results) for i in range(a.clients)]
    for c in clients:
        c.start()
    for c in clients:
        # Bounded: a client ends after its push in flight at the deadline.
        c.join(timeout=a.seconds + 600)
    elapsed = time.monotonic() - start
    lat = sorted(r[1] for r in results)
    wrong = [r for r in results if r[2]]
    ndec, problems = check_audit(a)
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
    kinds = {k: sum(1 for r in results if r[0] == k) for k in ("create", "ff", "force", "main")}
    print("load: %d clients, %.0f s, %d pushes (%s)" % (
        a.clients, elapsed, len(results), ", ".join("%s %d" % kv for kv in kinds.items())))
    print("  pushes/s                 %8.2f" % (len(results) / elapsed))
    print("  latency p50 / p99        %8.3f / %.3f s" % (pct(0.50), pct(0.99)))
    print("  gateway peak RSS         %8.1f MB" % (peak_rss_kb(a.gateway_pid) / 1024))
    print("  wrong decisions          %8d" % len(wrong))
    print("  ref decisions audited    %8d, problems: %d" % (ndec, len(problems)))
    for r in wrong[:5]:
        print("  WRONG %s: %s" % (r[0], r[3].strip()[:300]))
    for p in problems[:5]:
        print("  AUDIT " + p)
    shutil.rmtree(a.work, ignore_errors=True)
    return 1 if wrong or problems else 0


if __name__ == "__main__":
    sys.exit(main())
