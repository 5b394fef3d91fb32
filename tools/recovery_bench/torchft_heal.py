"""torchft's heal of a restarted replica, timed (tools/recovery_bench.sh).

Run with the torch venv's python (tools/install_torch.sh installs torchft
0.2.0 there). One trial: this driver hosts torchft's Lighthouse (the PyPI
wheel's native LighthouseServer, min_replicas=2) and starts 3 replica groups
x 2 ranks on CPU/Gloo, each rank a process with its own torchft Manager
(group rank 0 hosts the group's ManagerServer; each group has its own
TCPStore, hosted here). The model is //examples/elastic's: each group rank
holds a shard of 4 parameters; step s: an all-reduce of the shard's sum
inside the replica group (a plain Gloo group), a gradient
g[j] = ((s + replica + j + total) mod 5) + 1 padded with PAD zero floats,
Manager.allreduce (SUM) across the replicas, Manager.should_commit, then
p = (p + g) mod 1000. The state a replica heals with is the parameters and
torchft's step (Manager's state_dict hooks; the default HTTP checkpoint
transport).

Group 1's rank 0 SIGKILLs itself at the start of step KILL_STEP; the driver
then stops group 1's other rank and starts both again with a fresh store (a
replica group restarts as a whole, as torchrun does for torchft's groups);
the survivors go on with 2 replicas meanwhile. Timed: from the restarted
group being ready (the later of its two ranks' Manager constructed, just
before its first quorum) to the last of the 6 ranks completing its first
committed step with 3 participants (the restarted ranks with the state they
healed from a peer). use_async_quorum=False: a healing replica loads the
state at the quorum and takes part in that same step (with the default
async quorum it would sit that step out). After 3 full-size steps every
rank prints its parameters; the driver checks that the replicas agree.

Prints one line: heal_ms=<ms> kill_to_full_ms=<ms>, or heal_ms=fail <why>.
Everything it starts is killed by the end (and dies with it: PDEATHSIG).

  /opt/devmesh/torch-venv/bin/python tools/recovery_bench/torchft_heal.py
"""
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta

GROUPS = 3
GROUP_SIZE = 2
SHARD = 4
TRIAL_LIMIT_S = float(os.environ.get("TRIAL_LIMIT_S", "150"))


def worker():
    import torch
    import torch.distributed as dist
    from torchft import Manager, ProcessGroupGloo

    g = int(os.environ["REPLICA_GROUP_ID"])
    r = int(os.environ["GROUP_RANK"])
    incarnation = int(os.environ["INCARNATION"])
    kill_step = int(os.environ.get("KILL_STEP", "10"))
    pad = int(os.environ.get("PAD", str(1 << 16)))
    addr = "127.0.0.1"
    port = int(os.environ["GROUP_STORE_PORT"])
    store = dist.TCPStore(addr, port, is_master=False,
                          timeout=timedelta(seconds=60))
    # The shard dim: a Gloo group inside the replica group.
    dist.init_process_group("gloo", store=dist.PrefixStore("inner", store),
                            rank=r, world_size=GROUP_SIZE)
    params = torch.tensor([float(r * SHARD + j) for j in range(SHARD)])

    def load_state_dict(sd):
        params.copy_(sd["params"])

    def state_dict():
        return {"params": params}

    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=10)),
        load_state_dict=load_state_dict, state_dict=state_dict,
        min_replica_size=2, use_async_quorum=False,
        timeout=timedelta(seconds=10), quorum_timeout=timedelta(seconds=60),
        rank=r, world_size=GROUP_SIZE, store_addr=addr, store_port=port,
        lighthouse_addr=os.environ["TORCHFT_LIGHTHOUSE"],
        replica_id="bench_%d" % g)
    ctl = dist.TCPStore(addr, int(os.environ["CONTROL_PORT"]),
                        is_master=False, timeout=timedelta(seconds=60))
    if incarnation == 0:
        ctl.set("ready/%d/%d" % (g, r), "1")
        ctl.wait(["go"])
    else:
        print("ready_ns=%d" % time.time_ns(), flush=True)
    buf = torch.zeros(SHARD + pad)
    shrunk = False
    stop_at = None
    while stop_at is None or manager.current_step() < stop_at:
        step = manager.current_step()
        if incarnation == 0 and g == 1 and r == 0 and step == kill_step:
            print("kill_ns=%d" % time.time_ns(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        manager.start_quorum()
        replica = manager.participating_rank() or 0
        buf.zero_()
        buf[0] = params.sum()
        dist.all_reduce(buf)
        total = buf[0].item()
        buf.zero_()
        for j in range(SHARD):
            buf[j] = (step + replica + j + total) % 5 + 1
        manager.allreduce(buf, reduce_op=dist.ReduceOp.SUM).wait()
        n = manager.num_participants()
        if manager.should_commit():
            params.copy_(torch.fmod(params + buf[:SHARD], 1000.0))
            if n < GROUPS:
                shrunk = True
            elif (shrunk or incarnation > 0) and stop_at is None:
                print("full_step_ns=%d step=%d" % (
                    time.time_ns(), manager.current_step() - 1), flush=True)
                stop_at = manager.current_step() + 3
    print("final g=%d r=%d step=%d params=%s" % (
        g, r, manager.current_step(), params.tolist()), flush=True)
    manager.shutdown(wait=False)
    os._exit(0)


def die_with_parent():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def driver():
    import torch.distributed as dist
    from torchft._torchft import LighthouseServer

    deadline = time.monotonic() + TRIAL_LIMIT_S
    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=2,
                                  join_timeout_ms=1000,
                                  heartbeat_timeout_ms=1000)
    ctl = dist.TCPStore("127.0.0.1", 0, is_master=True,
                        wait_for_workers=False)
    stores = []
    procs = {}   # (g, r, incarnation) -> Popen
    outs = {}    # same -> output file path
    work = os.environ.get("WORK_DIR", "/tmp")

    def start(g, incarnation):
        gs = dist.TCPStore("127.0.0.1", 0, is_master=True,
                           wait_for_workers=False)
        stores.append(gs)
        for r in range(GROUP_SIZE):
            env = dict(os.environ, REPLICA_GROUP_ID=str(g), GROUP_RANK=str(r),
                       INCARNATION=str(incarnation),
                       GROUP_STORE_PORT=str(gs.port),
                       CONTROL_PORT=str(ctl.port),
                       TORCHFT_LIGHTHOUSE=lighthouse.address(),
                       TORCHFT_WORKER="1")
            path = os.path.join(work, "torchft_%d_%d_%d.out" %
                                (g, r, incarnation))
            outs[(g, r, incarnation)] = path
            with open(path, "w") as f:
                procs[(g, r, incarnation)] = subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__)], env=env,
                    stdout=f, stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent)

    def text(key):
        with open(outs[key]) as f:
            return f.read()

    def tails(keys):
        return "; ".join("%s: %s" % (k, text(k)[-300:].replace("\n", " | "))
                         for k in keys)

    stage = "starting the 6 ranks"
    try:
        for g in range(GROUPS):
            start(g, 0)
        keys = ["ready/%d/%d" % (g, r) for g in range(GROUPS)
                for r in range(GROUP_SIZE)]
        ctl.wait(keys, timedelta(seconds=max(1, deadline - time.monotonic())))
        ctl.set("go", "1")
        stage = "training to the kill"
        victim = procs[(1, 0, 0)]
        while victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if victim.poll() is not None:
            procs[(1, 1, 0)].kill()
            procs[(1, 1, 0)].wait()
            start(1, 1)
        stage = "the restarted group healing and every rank finishing"
        live = [k for k in procs if not (k[0] == 1 and k[2] == 0)]
        while time.monotonic() < deadline:
            if all(procs[k].poll() is not None for k in live):
                break
            time.sleep(0.05)
        else:
            return "heal_ms=fail timed out after %.0f s in %s: %s" % (
                TRIAL_LIMIT_S, stage,
                tails([k for k in live if procs[k].poll() is None]))
        bad = [k for k in live if procs[k].returncode != 0]
        if bad:
            return "heal_ms=fail ranks %s exited %s: %s" % (
                bad, [procs[k].returncode for k in bad],
                text(bad[0])[-2000:])
        kill = re.findall(r"kill_ns=(\d+)", text((1, 0, 0)))
        ready = [int(x) for k in live if k[2] == 1
                 for x in re.findall(r"ready_ns=(\d+)", text(k))]
        full = [int(x) for k in live
                for x in re.findall(r"full_step_ns=(\d+)", text(k))]
        finals = {}
        for k in live:
            m = re.search(r"final g=(\d+) r=(\d+) step=(\d+) params=(.*)",
                          text(k))
            if m:
                finals.setdefault(int(m.group(2)), set()).add(
                    (m.group(3), m.group(4)))
        if len(kill) != 1 or len(ready) != 2 or len(full) != 6:
            return "heal_ms=fail kill %d, ready %d, full-size steps %d" % (
                len(kill), len(ready), len(full))
        if any(len(v) != 1 for v in finals.values()) or len(finals) != 2:
            return "heal_ms=fail replicas disagree at the end: %s" % finals
        return "heal_ms=%.1f kill_to_full_ms=%.1f" % (
            (max(full) - max(ready)) / 1e6, (max(full) - int(kill[0])) / 1e6)
    except Exception as e:  # a store wait past the deadline, a spawn error
        return "heal_ms=fail in %s: %s: %s; %s" % (
            stage, type(e).__name__, e, tails(list(procs)))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        lighthouse.shutdown()


if __name__ == "__main__":
    if os.environ.get("TORCHFT_WORKER") == "1":
        worker()
    else:
        print(driver(), flush=True)
