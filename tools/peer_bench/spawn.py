"""Starts N local ranks of one command with torchrun's variables, as
torchrun --standalone or devmesh's //bootstrap:launch do, and collects the
lines they print that start with a given tag.

Every rank gets MASTER_ADDR=127.0.0.1, MASTER_PORT (a port that was free),
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and PEER_BENCH_T0_NS: the
wall-clock time (ns) just before the first rank is started, so each rank can
report its time since launch. With cpu_bind="core" rank r runs on the
(r mod k)-th of the k CPUs this process may use (allreduce_2d's
--cpu_bind=core). One rank failing, or the timeout passing, stops all of them
(SIGTERM, then SIGKILL after 5 s) and raises SpawnError with their output.
"""
import json
import os
import socket
import subprocess
import tempfile
import time


class SpawnError(RuntimeError):
    pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_ranks(argv, nproc, tag, timeout_s, cpu_bind="none", extra_env=None):
    """Runs nproc ranks of argv; returns, per rank, the JSON objects of its
    stdout lines that contain `tag` followed by a JSON object."""
    env = dict(os.environ)
    env.update(extra_env or {})
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
                "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc)})
    cpus = sorted(os.sched_getaffinity(0))
    procs = []
    # Output goes to files, not pipes: a chatty rank never blocks on a full
    # pipe while this loop waits for it to exit.
    logs = [tempfile.TemporaryFile("w+") for _ in range(nproc)]
    env["PEER_BENCH_T0_NS"] = str(time.time_ns())
    try:
        for r in range(nproc):
            rank_env = dict(env, RANK=str(r), LOCAL_RANK=str(r))
            preexec = None
            if cpu_bind == "core":
                cpu = cpus[r % len(cpus)]
                preexec = lambda cpu=cpu: os.sched_setaffinity(0, {cpu})
            procs.append(subprocess.Popen(
                argv, env=rank_env, stdout=logs[r], stderr=subprocess.STDOUT,
                preexec_fn=preexec))
        deadline = time.monotonic() + timeout_s
        outputs = [None] * nproc
        pending = set(range(nproc))
        while pending:
            for r in sorted(pending):
                p = procs[r]
                if p.poll() is not None:
                    logs[r].seek(0)
                    outputs[r] = logs[r].read()
                    pending.discard(r)
                    if p.returncode != 0:
                        _stop(procs)
                        raise SpawnError("%s: rank %d exited %d:\n%s" % (
                            " ".join(argv), r, p.returncode, outputs[r][-3000:]))
            if pending and time.monotonic() > deadline:
                _stop(procs)
                raise SpawnError("%s: ranks %s still running after %d s" % (
                    " ".join(argv), sorted(pending), timeout_s))
            time.sleep(0.005)
    except BaseException:
        _stop(procs)
        raise
    finally:
        for f in logs:
            f.close()
    results = []
    for r, out in enumerate(outputs):
        found = []
        for line in out.splitlines():
            at = line.find(tag + " ")
            if at >= 0:
                found.append(json.loads(line[at + len(tag) + 1:]))
        results.append(found)
    return results
