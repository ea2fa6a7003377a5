#!/usr/bin/env python3
"""Time commands interleaved: one run of each in turn, RUNS rounds after
WARMUP rounds, so load on a shared machine falls on all of them alike and
their ratios hold where sequential timings (hyperfine's) drift apart.

    interleave.py [--warmup N] [--runs N] [--cwd DIR] --json OUT CMD...

Each CMD is one argument, split like a shell would (no shell runs it); its
output is discarded and a failure stops everything. OUT gets hyperfine's
export shape: {"results": [{"command", "median", "mean", "min", "max"}]},
in seconds.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--cwd")
    ap.add_argument("--json", required=True)
    ap.add_argument("cmds", nargs="+")
    a = ap.parse_args()
    argvs = [shlex.split(c) for c in a.cmds]
    times = [[] for _ in argvs]
    for rnd in range(a.warmup + a.runs):
        for i, argv in enumerate(argvs):
            start = time.perf_counter()
            r = subprocess.run(argv, cwd=a.cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            took = time.perf_counter() - start
            if r.returncode != 0:
                sys.exit(f"interleave.py: '{a.cmds[i]}' exited {r.returncode}")
            if rnd >= a.warmup:
                times[i].append(took)
    out = {"results": [{"command": c, "median": statistics.median(t),
                        "mean": statistics.fmean(t), "min": min(t), "max": max(t)}
                       for c, t in zip(a.cmds, times)]}
    with open(a.json, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
