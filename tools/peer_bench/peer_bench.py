"""devmesh side by side with PyTorch's DeviceMesh and Open MPI, in one run:
the driver behind tools/peer_bench.sh (which builds the devmesh binaries,
mpi_allreduce and membw, and finds the venv; run that, not this).

  python peer_bench.py --bin_dir BAZEL_BIN/bench --out_dir DIR [--short]
      [--mpi_allreduce BIN] [--membw BIN] [--devmesh_backend auto]

Sections, each running devmesh's side and its peers' back to back on this
machine (PyTorch with the python running this script):
  bound       membw on one core, then one process per CPU at once (copy and
              add GB/s); report.bound_busbw turns it into the all-reduce
              busbw that memory bandwidth allows.
  startup     bench/startup vs torch_startup.py, local ranks started the
              same way (spawn.py), per shape (8 ranks in four shapes, then
              16 as 4x4 and 32 as 8x4 in the full mode), --startup_repeats
              launches each, alternating devmesh and PyTorch.
  allreduce   bench/allreduce_2d (2x2 dp,tp float32, --target_ci=0 so every
              size runs exactly --iters iterations) vs torch_allreduce.py and
              mpi_allreduce under mpirun (MPIRUN_ARGS), the same measurement
              on 4 ranks, each bound to one CPU as allreduce_2d binds;
              --rounds rounds, round r starting with side r mod 3; the
              ratios are paired by round (stats.paired_ratio).
  collectives bench/collectives_2d vs torch_collectives.py: all-gather,
              reduce-scatter, reduce, gather, scatter and all-to-all with
              uneven splits per dim at 1 MiB and 16 MiB, --rounds rounds,
              alternating.
  layout      bench/mesh_ops_peer vs torch_layout.py; memory of one mesh.
  store       bazel-bin/bench/store_ops --json_out (issue 10's peer columns
              against torch's TCPStore) when it has that flag.
Writes DIR/peer_bench.json (meta, rows, raw results), DIR/peer_bench.png,
prints the table. Exit status 1 when any section failed or any side gave a
wrong element (the output is still written), 2 for bad arguments.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402
import spawn  # noqa: E402

# Loopback for PyTorch's Gloo, as devmesh's Gloo uses on one host.
TORCH_ENV = {"GLOO_SOCKET_IFNAME": "lo"}


def log(msg):
    print("peer_bench: " + msg, file=sys.stderr, flush=True)


def run_group(argv, timeout_s, env=None):
    """Runs argv in a session of its own and returns its stdout; on a
    non-zero exit, the timeout, or any exception, every process of that
    session (a launcher's or mpirun's ranks too) gets SIGTERM, then SIGKILL
    after 5 s, and CalledProcessError / TimeoutExpired is raised."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout_s)
    except BaseException:
        _kill_group(p)
        raise
    if p.returncode != 0:
        _kill_group(p)
        raise subprocess.CalledProcessError(p.returncode, argv, out,
                                            err[-3000:])
    return out


def _session(sid):
    """The pids of the processes in session `sid` (mpirun puts each rank in
    a process group of its own, but they stay in mpirun's session)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(name))
    return pids


def _kill_group(p):
    """SIGTERM to p's session (its process groups), then SIGKILL to what is
    left after 5 s; returns once p and the session are gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in set(_session(p.pid)) | {p.pid}:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if p.poll() is not None and not _session(p.pid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    try:
        p.communicate(timeout=1)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def startup_figures(ranks, side):
    """launch_ms: launch to the last rank's groups usable; init_ms: from the
    moment the last rank entered main() (devmesh) or finished its imports
    (PyTorch) to the last rank's groups usable, so import and exec skew
    between ranks is not counted as init."""
    per_rank = [r[0] for r in ranks]
    ready = max(r["ready_ns"] for r in per_rank)
    t0 = per_rank[0]["t0_ns"]
    began = max(r.get("import_ns", r["main_ns"]) for r in per_rank)
    return {"side": side, "launch_ms": (ready - t0) / 1e6,
            "init_ms": (ready - began) / 1e6,
            "communicators": max(r["communicators"] for r in per_rank),
            "store_round_trips": None if per_rank[0]["store_round_trips"] is None
            else max(r["store_round_trips"] for r in per_rank)}


def run_startup(a):
    out = {}
    for shape in a.shapes.split(","):
        size = 1
        for s in shape.split("x"):
            size *= int(s)
        sides = {"devmesh": [], "torch": []}
        for rep in range(a.startup_repeats):
            for side in ("devmesh", "torch"):
                # devmesh's CPU default (shared memory for groups inside a
                # host), against PyTorch's default CPU backend (Gloo).
                argv = ([os.path.join(a.bin_dir, "startup"),
                         "--mesh_shape=" + shape, "--backend=auto"]
                        if side == "devmesh" else
                        [sys.executable, os.path.join(HERE, "torch_startup.py"),
                         shape])
                ranks = spawn.run_ranks(argv, size, "PEER_BENCH_STARTUP",
                                        a.step_timeout, extra_env=TORCH_ENV)
                sides[side].append(startup_figures(ranks, side))
            log("startup %s %d/%d: devmesh %.0f ms, PyTorch %.0f ms" % (
                shape, rep + 1, a.startup_repeats,
                sides["devmesh"][-1]["launch_ms"],
                sides["torch"][-1]["launch_ms"]))
        out[shape] = sides
    return out


def sweep(a):
    sizes, b = [], a.min_bytes
    while b <= a.max_bytes:
        sizes.append(b)
        b *= 2
    if a.sizes:
        keep = {int(s) for s in a.sizes.split(",")}
        sizes = [s for s in sizes if s in keep]
    return sizes


def devmesh_allreduce_round(a, sizes, path):
    argv = [os.path.join(a.bin_dir, "allreduce_2d"), "--mesh_shape=2x2",
            "--mesh_dim_names=dp,tp", "--dtype=float32",
            "--backend=" + a.devmesh_backend,
            "--min_bytes=%d" % a.min_bytes, "--max_bytes=%d" % a.max_bytes,
            "--iters=%d" % a.iters, "--warmup=%d" % a.warmup,
            "--target_ci=0", "--benchmark_out=" + path,
            "--benchmark_out_format=json",
            # The raw groups beside the mesh's skip the per-call check, so
            # that mesh/raw shows what the check (with the mesh's guard)
            # costs, in the same run (the "check" note of each row).
            "--raw_call_check=false"]
    if a.sizes:
        argv.append("--benchmark_filter=^allreduce_2d/[^/]+/(%s)/"
                    % "|".join(str(s) for s in sizes))
    out = run_group(argv, a.step_timeout)
    # "[rank 0] # dim dp: inside one host, backend shm" (allreduce_2d's
    # last lines, prefixed by the launcher)
    backends = {}
    for line in out.splitlines():
        at = line.find("# dim ")
        if at >= 0 and ", backend " in line:
            backends[line[at + 6:line.index(":", at)]] = line.rsplit(" ", 1)[1]
    with open(path) as f:
        doc = json.load(f)
    cells = {}
    for bm in doc["benchmarks"]:
        parts = bm["name"].split("/")
        if parts[0] != "allreduce_2d" or "busbw_GBps" not in bm:
            continue
        cells["%s/%s" % (parts[1], parts[2])] = {
            "busbw": bm["busbw_GBps"], "wrong": int(bm["wrong"]),
            "iters": int(bm["iters"]), "batch": int(bm["batch"]),
            "backend": backends.get(parts[1]),
            "checked_over_unchecked": bm.get("mesh_over_raw_busbw")}
    return cells


def allreduce_cells(ranks0):
    cells = {}
    for c in ranks0:
        cells["%s/%d" % (c["dim"], c["bytes"])] = {
            "busbw": report.stats.allreduce_bus_bandwidth_gbps(
                c["bytes"], c["group_size"], c["seconds"]),
            "wrong": c["wrong"], "iters": c["iters"], "batch": c["batch"]}
    return cells


def torch_allreduce_round(a, sizes):
    argv = [sys.executable, os.path.join(HERE, "torch_allreduce.py"),
            "--shape", "2x2", "--names", "dp,tp",
            "--sizes", ",".join(str(s) for s in sizes),
            "--iters", str(a.iters), "--warmup", str(a.warmup)]
    ranks = spawn.run_ranks(argv, 4, "PEER_BENCH_ALLREDUCE", a.step_timeout,
                            cpu_bind="core", extra_env=TORCH_ENV)
    return allreduce_cells(ranks[0])


# Open MPI's settings for 4 ranks on this machine's CPUs (named in the
# table's note): rank r bound to the (r mod k)-th core as allreduce_2d binds
# (map by core, wrapping; overload-allowed because 4 ranks share 2 cores),
# shared memory (vader) and self only, and yielding when idle so that ranks
# sharing a core do not starve each other.
MPIRUN_ARGS = ["-np", "4", "--oversubscribe", "--map-by", "core",
               "--bind-to", "core:overload-allowed", "--mca", "btl",
               "self,vader", "--mca", "mpi_yield_when_idle", "1"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def mpi_allreduce_round(a, sizes):
    argv = (["mpirun"] + MPIRUN_ARGS +
            [a.mpi_allreduce, "--shape", "2x2", "--names", "dp,tp",
             "--sizes", ",".join(str(s) for s in sizes),
             "--iters", str(a.iters), "--warmup", str(a.warmup)])
    out = run_group(argv, a.step_timeout, env=dict(os.environ, **MPI_ENV))
    return allreduce_cells(tagged(out, "PEER_BENCH_ALLREDUCE"))


def run_allreduce(a):
    sizes = sweep(a)
    sides = ["devmesh", "torch"] + (["mpi"] if a.mpi_allreduce else [])
    out = {side: [] for side in sides}
    out["sizes"] = sizes
    out["order"] = []
    if not a.mpi_allreduce:
        out["mpi_unavailable"] = "n/a (no mpicc build)"
    for r in range(a.rounds):
        # The sides take turns going first: round r starts at side r mod 3.
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        out["order"].append(order)
        for side in order:
            if side == "devmesh":
                path = os.path.join(a.out_dir, "allreduce_2d_round%d.json" % r)
                out[side].append(devmesh_allreduce_round(a, sizes, path))
            elif side == "torch":
                out[side].append(torch_allreduce_round(a, sizes))
            else:
                out[side].append(mpi_allreduce_round(a, sizes))
        log("allreduce round %d/%d done (%s)" % (r + 1, a.rounds,
                                                 ", ".join(order)))
    return out


def collective_cells(ranks0):
    cells = {}
    for c in ranks0:
        # nccl-tests' busbw: algbw for reduce, x (n - 1) / n for the others.
        busbw = (report.stats.alg_bandwidth_gbps(c["bytes"], c["seconds"])
                 if c["op"] == "reduce" else
                 report.stats.collective_bus_bandwidth_gbps(
                     c["bytes"], c["group_size"], c["seconds"]))
        cells["%s/%s/%d" % (c["op"], c["dim"], c["bytes"])] = {
            "busbw": busbw,
            "wrong": c["wrong"], "iters": c["iters"], "batch": c["batch"],
            "backend": c.get("backend")}
    return cells


# The collective rows' operations, on both sides.
COLLECTIVE_OPS = "all_gather,reduce_scatter,reduce,gather,scatter,all_to_all_v"


def run_collectives(a):
    sizes = ",".join(str(s) for s in a.collective_sizes)
    out = {"devmesh": [], "torch": [], "order": []}
    for r in range(a.rounds):
        order = ["devmesh", "torch"] if r % 2 == 0 else ["torch", "devmesh"]
        out["order"].append(order)
        for side in order:
            if side == "devmesh":
                text = run_group(
                    [os.path.join(a.bin_dir, "collectives_2d"),
                     "--mesh_shape=2x2", "--mesh_dim_names=dp,tp",
                     "--backend=" + a.devmesh_backend, "--sizes=" + sizes,
                     "--ops=" + COLLECTIVE_OPS,
                     "--iters=%d" % a.iters, "--warmup=%d" % a.warmup],
                    a.step_timeout)
                out[side].append(collective_cells(
                    tagged(text, "PEER_BENCH_COLLECTIVE")))
            else:
                ranks = spawn.run_ranks(
                    [sys.executable, os.path.join(HERE, "torch_collectives.py"),
                     "--shape", "2x2", "--names", "dp,tp", "--sizes", sizes,
                     "--ops", COLLECTIVE_OPS,
                     "--iters", str(a.iters), "--warmup", str(a.warmup)],
                    4, "PEER_BENCH_COLLECTIVE", a.step_timeout,
                    cpu_bind="core", extra_env=TORCH_ENV)
                out[side].append(collective_cells(ranks[0]))
        log("collectives round %d/%d done" % (r + 1, a.rounds))
    return out


def mpi_version():
    try:
        text = subprocess.run(["mpirun", "--version"], capture_output=True,
                              text=True, timeout=30, env=dict(os.environ,
                                                              **MPI_ENV)).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return text.splitlines()[0].strip() if text else None


def run_bound(a):
    """membw on one core, then one process per CPU at once."""
    if not a.membw:
        return {"unavailable": "n/a (no membw build)"}
    out = {}
    for procs, key in ((1, "one_core"), (len(os.sched_getaffinity(0)),
                                         "all_cores")):
        text = run_group([a.membw, "--procs", str(procs), "--reps",
                          str(a.membw_reps)], a.step_timeout)
        out[key] = tagged(text, "PEER_BENCH_MEMBW")[0]
    return out


def tagged(text, tag):
    return [json.loads(line[line.find(tag) + len(tag) + 1:])
            for line in text.splitlines() if tag + " " in line]


def run_layout(a):
    dm = subprocess.run(
        [os.path.join(a.bin_dir, "mesh_ops_peer"), "--worlds=" + a.worlds,
         "--samples=%d" % a.samples, "--calls=%d" % a.calls],
        check=True, timeout=a.step_timeout, capture_output=True, text=True)
    tv = subprocess.run(
        [sys.executable, os.path.join(HERE, "torch_layout.py"),
         "--worlds", a.worlds, "--samples", str(a.samples),
         "--calls", str(a.calls)],
        check=True, timeout=a.step_timeout, capture_output=True, text=True)
    largest = max(int(w) for w in a.worlds.split(","))
    tm = subprocess.run(
        [sys.executable, os.path.join(HERE, "torch_layout.py"),
         "--memory", str(largest)],
        check=True, timeout=a.step_timeout, capture_output=True, text=True)
    layout = {"devmesh": tagged(dm.stdout, "PEER_BENCH_LAYOUT"),
              "torch": tagged(tv.stdout, "PEER_BENCH_LAYOUT")}
    memory = {"devmesh": tagged(dm.stdout, "PEER_BENCH_MEMORY")[0],
              "torch": tagged(tm.stdout, "PEER_BENCH_MEMORY")[0]}
    return layout, memory


def run_store(a):
    if not a.store_ops:
        return {"unavailable": "n/a (store_ops --json_out not available)"}
    if a.short:
        return {"unavailable": "n/a (skipped in --short)"}
    path = os.path.join(a.out_dir, "store_ops.json")
    subprocess.run([a.store_ops, "--json_out=" + path], check=True,
                   timeout=a.store_timeout, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bin_dir", required=True,
                   help="directory of the built startup, mesh_ops_peer and "
                   "allreduce_2d binaries")
    p.add_argument("--out_dir", required=True)
    p.add_argument("--short", action="store_true",
                   help="CI: one shape, three sizes, one round, two worlds")
    p.add_argument("--store_ops", default="",
                   help="store_ops binary that accepts --json_out (empty: "
                   "the store rows are n/a)")
    p.add_argument("--mpi_allreduce", default="",
                   help="mpi_allreduce binary built with mpicc (empty: the "
                   "Open MPI column is n/a)")
    p.add_argument("--membw", default="",
                   help="membw binary (empty: the bound column is n/a)")
    p.add_argument("--devmesh_backend", default="auto",
                   help="allreduce_2d's and collectives_2d's --backend "
                   "(auto: the CPU default, shared memory inside one host)")
    p.add_argument("--sections",
                   default="bound,startup,allreduce,collectives,layout,store")
    p.add_argument("--build_note", default="")
    p.add_argument("--rounds_override", type=int, default=None,
                   help="rounds of the allreduce and collectives sections "
                   "(unset: the mode's, 3 full, 1 short)")
    p.add_argument("--sizes_override", default="",
                   help="comma-separated all-reduce sizes in bytes, each a "
                   "power of two in the mode's range (empty: every one)")
    p.add_argument("--step_timeout", type=int, default=600,
                   help="seconds allowed to any one launch")
    p.add_argument("--store_timeout", type=int, default=1800,
                   help="seconds allowed to store_ops (its op rows take "
                   "about 3 minutes on a 2-core machine, 6 rounds; PyTorch's "
                   "TCPStore takes tens of seconds per rendezvous burst)")
    a = p.parse_args()
    # SIGTERM (peer_bench.sh's timeout or trap) unwinds, so that run_group
    # and spawn.run_ranks stop the process groups they started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    full = dict(shapes="8,4x2,2x4,2x2x2,4x4,8x4", startup_repeats=3, rounds=3,
                iters=20, warmup=5, min_bytes=1 << 10, max_bytes=64 << 20,
                sizes="", worlds="8,1024,32768,1048576", samples=7, calls=200,
                collective_sizes=[1 << 20, 16 << 20], membw_reps=10)
    short = dict(shapes="4x2", startup_repeats=1, rounds=1, iters=5, warmup=2,
                 min_bytes=1 << 10, max_bytes=1 << 20,
                 sizes="1024,65536,1048576", worlds="8,1048576", samples=3,
                 calls=20, collective_sizes=[1 << 20, 16 << 20], membw_reps=5)
    for k, v in (short if a.short else full).items():
        setattr(a, k, v)
    if a.rounds_override is not None:
        if a.rounds_override < 1:
            p.error("--rounds must be at least 1, not %d" % a.rounds_override)
        a.rounds = a.rounds_override
    if a.sizes_override:
        try:
            wanted = [int(x) for x in a.sizes_override.split(",")]
        except ValueError:
            p.error("--sizes takes comma-separated byte counts, not '%s'" %
                    a.sizes_override)
        for b in wanted:
            if b < a.min_bytes or b > a.max_bytes or b & (b - 1):
                p.error("--sizes: %d is not a power of two in %d..%d" %
                        (b, a.min_bytes, a.max_bytes))
        a.sizes = a.sizes_override
    sections = a.sections.split(",")
    for s in sections:
        if s not in ("bound", "startup", "allreduce", "collectives", "layout",
                     "store"):
            p.error("unknown section '%s'" % s)
    if not os.path.isdir(a.bin_dir):
        p.error("--bin_dir %s is not a directory" % a.bin_dir)
    os.makedirs(a.out_dir, exist_ok=True)
    import torch  # the venv check: fail here, clearly, not in 8 ranks
    meta = {"date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S"),
            "mode": "short" if a.short else "full", "torch": torch.__version__,
            "cpus": len(os.sched_getaffinity(0)),
            "loadavg_start": os.getloadavg(), "build": a.build_note,
            "settings": {k: getattr(a, k) for k in full},
            "devmesh_backend": a.devmesh_backend,
            "mpirun": ("mpirun " + " ".join(MPIRUN_ARGS)
                       if a.mpi_allreduce else None),
            "mpi_version": mpi_version() if a.mpi_allreduce else None,
            "errors": []}
    results = {}
    started = time.monotonic()
    steps = (("bound", run_bound), ("startup", run_startup),
             ("allreduce", run_allreduce), ("collectives", run_collectives))
    for name, fn in steps:
        if name in sections:
            try:
                results[name] = fn(a)
            except (spawn.SpawnError, subprocess.SubprocessError, OSError,
                    ValueError, KeyError, IndexError) as e:
                meta["errors"].append("%s: %s" % (name, e))
                log("%s FAILED: %s" % (name, e))
    if "layout" in sections:
        try:
            results["layout"], results["memory"] = run_layout(a)
        except (subprocess.SubprocessError, OSError, ValueError,
                IndexError) as e:
            meta["errors"].append("layout: %s" % e)
            log("layout FAILED: %s" % e)
    if "store" in sections:
        try:
            results["store"] = run_store(a)
        except (subprocess.SubprocessError, OSError, ValueError) as e:
            results["store"] = {"unavailable": "failed: %s" % e}
            meta["errors"].append("store: %s" % e)
    meta["loadavg_end"] = os.getloadavg()
    meta["seconds"] = round(time.monotonic() - started, 1)
    rows = report.build_rows(results)
    wrong = [r["name"] for r in rows if "WRONG" in r["note"]]
    if wrong:
        meta["errors"].append("wrong all-reduce results: " + ", ".join(wrong))
    title = ("devmesh vs PyTorch %s DeviceMesh and Open MPI (%s mode), %d CPUs, load %.2f "
             "at start / %.2f at end, %s, %.0f s%s" % (
                 torch.__version__, meta["mode"], meta["cpus"],
                 meta["loadavg_start"][0], meta["loadavg_end"][0],
                 meta["date_utc"], meta["seconds"],
                 ", " + a.build_note if a.build_note else ""))
    table = report.format_table(title, rows, report.notes(results, meta))
    sys.stdout.write(table)
    with open(os.path.join(a.out_dir, "peer_bench.txt"), "w") as f:
        f.write(table)
    report.write_json(os.path.join(a.out_dir, "peer_bench.json"), meta,
                      results, rows)
    png = os.path.join(a.out_dir, "peer_bench.png")
    drawn = []
    try:
        drawn = report.write_plot(rows, png, "devmesh / PyTorch %s and / Open MPI, %s mode, %s" % (
            torch.__version__, meta["mode"], meta["date_utc"]))
    except (subprocess.SubprocessError, OSError) as e:
        meta["errors"].append("plot: %s" % e)
    for e in meta["errors"]:
        log("ERROR " + e)
    if drawn:
        log("wrote %s/peer_bench.{json,txt,png} (plot panels: %s)" % (
            a.out_dir, ", ".join(drawn)))
    else:
        log("wrote %s/peer_bench.{json,txt} (no plot: nothing to draw)" %
            a.out_dir)
    return 1 if meta["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
