#!/usr/bin/env python3
"""tools/scale_check/summarize.py: one row from the PEER_BENCH_STARTUP lines
that //bench:startup's ranks print (read from the files given, or stdin).

  summarize.py [--hosts H] [--store_rank R] [--expect_ranks N]
               [--expect_round_trips T] [--max_sockets S] [--label L] LOG...

Prints one table row: label, ranks, hosts, launch to the last rank's
main() (seconds: process start-up on this machine's cores), launch to the
last rank's InitDeviceMesh return (the rendezvous), the longest time a rank
took from there to its groups usable, launch to usable
(the last rank's ready time minus the launch time, seconds), from there to
the last rank past a Barrier per dim (+mesh: the first collective off the
small all-reduce route, which connects the pairs a Gloo group left for first
use; -1 when the ranks did not time it), and the maximum over
ranks of the store round trips, store payload bytes and communicators of
group creation, of the sockets a rank holds when ready (the rank that hosts
the store, --store_rank, is left out: its store clients are not its groups'),
of peak RSS (MiB), and of the HTTP requests a rank's etcd store sent up to
ready ("http/rank": the etcd_requests field; "-" over another store).
When the ranks report their CPU time (the cpu_us field), a second line
"cpu:" gives the CPU seconds the ranks spent together in each phase (user +
system, all threads): to main() (exec, loading, static initializers), to
InitDeviceMesh's return, per dim its GetGroup and its first all-reduce, and
in all up to ready; and beside each sum the mean per rank in ms. On C cores
a phase's sum / C bounds its wall time from below, whatever else runs on the
machine. Exit status 1, with the reason on stderr, when a
check given by --expect_ranks / --expect_round_trips / --max_sockets fails
(every rank reported; every rank's round trips equal T; no rank above S
sockets); 0 otherwise.
"""
import argparse
import json
import sys

TAG = "PEER_BENCH_STARTUP "


def main():
    p = argparse.ArgumentParser()
    p.add_argument("logs", nargs="*")
    p.add_argument("--hosts", type=int, default=1)
    p.add_argument("--store_rank", type=int, default=-1)
    p.add_argument("--expect_ranks", type=int)
    p.add_argument("--expect_round_trips", type=int)
    p.add_argument("--max_sockets", type=int)
    p.add_argument("--label", default="")
    p.add_argument("--header", action="store_true")
    a = p.parse_args()
    lines = []
    for path in a.logs or ["-"]:
        f = sys.stdin if path == "-" else open(path, errors="replace")
        lines += [l for l in f if TAG in l]
    rows = {}
    for l in lines:
        r = json.loads(l.split(TAG, 1)[1])
        rows[r["rank"]] = r
    errors = []
    if not rows:
        print("summarize: no PEER_BENCH_STARTUP line", file=sys.stderr)
        return 1
    t0 = min(r["t0_ns"] for r in rows.values())
    usable = (max(r["ready_ns"] for r in rows.values()) - t0) / 1e9
    started = (max(r["main_ns"] for r in rows.values()) - t0) / 1e9
    # The rendezvous ends together for all (rank 0 publishes the table);
    # groups: the slowest rank's own creation time, after its rendezvous.
    joined = (max(r.get("init_ns", r["main_ns"]) for r in rows.values())
              - t0) / 1e9
    groups_s = max(r["ready_ns"] - r.get("init_ns", r["main_ns"])
                   for r in rows.values()) / 1e9
    # From the last rank usable to the last rank past its first collective
    # off the small all-reduce route (every pair connected); -1: not timed.
    mesh = [r.get("mesh_ns", -1) for r in rows.values()]
    mesh_s = ((max(mesh) - max(r["ready_ns"] for r in rows.values())) / 1e9
              if min(mesh) > 0 else -1.0)
    trips = [r["store_round_trips"] for r in rows.values()]
    groups = [r for k, r in rows.items() if k != a.store_rank]
    sockets = max(r["sockets"] for r in groups) if groups else 0
    if a.header:
        print("%-14s %6s %5s %10s %10s %10s %10s %8s %12s %12s %8s %8s %9s %9s" % (
            "run", "ranks", "hosts", "started s", "joined s", "groups s",
            "usable s", "+mesh s", "trips/rank",
            "bytes/rank", "comms", "sockets", "rss MiB", "http/rank"))
    http = max(r.get("etcd_requests", -1) for r in rows.values())
    print("%-14s %6d %5d %10.2f %10.2f %10.2f %10.2f %8.2f %12d %12d %8d %8d %9.1f %9s" % (
        a.label, len(rows), a.hosts, started, joined, groups_s, usable,
        mesh_s, max(trips),
        max(r["store_bytes"] for r in rows.values()),
        max(r["communicators"] for r in rows.values()), sockets,
        max(r["maxrss_kb"] for r in rows.values()) / 1024.0,
        str(http) if http >= 0 else "-"))
    cpu = [r["cpu_us"] for r in rows.values() if "cpu_us" in r]
    if len(cpu) == len(rows):
        parts = [("main", [c["main"] for c in cpu]),
                 ("init", [c["init"] - c["main"] for c in cpu])]
        for d in range(len(cpu[0]["group"])):
            before = [c["init"] if d == 0 else c["allreduce"][d - 1]
                      for c in cpu]
            parts.append(("group%d" % d,
                          [c["group"][d] - b for c, b in zip(cpu, before)]))
            parts.append(("allreduce%d" % d,
                          [c["allreduce"][d] - c["group"][d] for c in cpu]))
        parts.append(("ready", [c["ready"] for c in cpu]))
        print("%-14s %s" % ("  cpu s (ms/rank)", "  ".join(
            "%s %.2f (%.2f)" % (name, sum(v) / 1e6, sum(v) / 1e3 / len(v))
            for name, v in parts)))
    if a.expect_ranks is not None and len(rows) != a.expect_ranks:
        missing = sorted(set(range(a.expect_ranks)) - set(rows))[:20]
        errors.append("%d of %d ranks reported; missing e.g. %s" % (
            len(rows), a.expect_ranks, missing))
    if a.expect_round_trips is not None:
        bad = sorted(k for k, r in rows.items()
                     if r["store_round_trips"] != a.expect_round_trips)
        if bad:
            errors.append("ranks %s made %s store round trips, not %d" % (
                bad[:10], [rows[k]["store_round_trips"] for k in bad[:10]],
                a.expect_round_trips))
    if a.max_sockets is not None and sockets > a.max_sockets:
        errors.append("a rank held %d sockets, above the bound %d" % (
            sockets, a.max_sockets))
    for e in errors:
        print("summarize: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
