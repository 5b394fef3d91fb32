"""tools/overlap_bench.sh's driver: bench/overlap (devmesh, IAllReduce) and
torch_overlap.py (PyTorch, async_op=True) for each shape, --rounds rounds
with the sides taking turns going first, then one table of medians over the
rounds: per (shape, dim) each side's blocking all-reduce, compute, serial
and overlapped times (ms), its overlapped / serial (0.5: perfect overlap,
1: none), and devmesh / PyTorch of the overlapped time. Exit status 1 when
a run failed or any side gave a wrong element."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import spawn  # noqa: E402


def tagged(text, tag):
    return [json.loads(line[line.find(tag) + len(tag) + 1:])
            for line in text.splitlines() if tag + " " in line]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True, help="bench/overlap binary")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--shapes", default="2x2,1x2")
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--timeout", type=int, default=300)
    a = p.parse_args()
    cells = {}  # (shape, dim, side) -> list of results
    for r in range(a.rounds):
        for shape in a.shapes.split(","):
            n = 1
            for s in shape.split("x"):
                n *= int(s)
            order = ["devmesh", "torch"] if r % 2 == 0 else ["torch", "devmesh"]
            for side in order:
                if side == "devmesh":
                    out = subprocess.run(
                        [a.bin, "--mesh_shape=" + shape,
                         "--bytes=%d" % a.bytes, "--iters=%d" % a.iters],
                        capture_output=True, text=True, timeout=a.timeout)
                    if out.returncode != 0:
                        sys.exit("bench/overlap failed:\n" + out.stdout +
                                 out.stderr)
                    rows = tagged(out.stdout, "OVERLAP")
                else:
                    rows = spawn.run_ranks(
                        [a.python, os.path.join(HERE, "torch_overlap.py"),
                         "--shape", shape, "--bytes", str(a.bytes),
                         "--iters", str(a.iters)],
                        n, "OVERLAP", a.timeout, cpu_bind="core")[0]
                for row in rows:
                    cells.setdefault((shape, row["dim"], side), []).append(row)
        print("overlap_bench: round %d/%d done" % (r + 1, a.rounds),
              file=sys.stderr, flush=True)
    wrong = 0
    print("# compute overlapped with an all-reduce (float32 max, %d bytes), "
          "%d rounds; ms are medians over rounds of each run's slowest-rank "
          "median; ovl/ser 0.5 = perfect overlap, 1 = none" %
          (a.bytes, a.rounds))
    head = ("shape", "dim", "n", "side", "comm_ms", "compute_ms", "serial_ms",
            "overlap_ms", "ovl/ser", "dm/PT overlap")
    print("%-5s %-4s %2s %-8s %9s %10s %9s %10s %7s %13s" % head)
    for shape in a.shapes.split(","):
        dims = sorted({k[1] for k in cells if k[0] == shape})
        for dim in dims:
            ovl = {}
            for side in ("devmesh", "torch"):
                rows = cells.get((shape, dim, side), [])
                if not rows:
                    continue
                wrong += sum(x["wrong"] for x in rows)
                m = {k: 1e3 * median([x[k] for x in rows])
                     for k in ("comm_s", "compute_s", "serial_s", "overlap_s")}
                ovl[side] = m["overlap_s"]
                ratio = m["overlap_s"] / m["serial_s"] if m["serial_s"] else 0
                versus = ""
                if side == "torch" and "devmesh" in ovl and ovl["torch"]:
                    versus = "%.3f" % (ovl["devmesh"] / ovl["torch"])
                print("%-5s %-4s %2d %-8s %9.4f %10.4f %9.4f %10.4f %7.3f %13s"
                      % (shape, dim, rows[0]["group_size"], side,
                         m["comm_s"], m["compute_s"], m["serial_s"],
                         m["overlap_s"], ratio, versus))
    if wrong:
        print("overlap_bench: %d WRONG elements" % wrong)
        sys.exit(1)


if __name__ == "__main__":
    main()
