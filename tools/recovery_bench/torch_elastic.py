"""The recovery baseline with PyTorch's DeviceMesh (tools/recovery_bench.sh).

The same job as //examples/elastic:elastic_training_main on a (dp, tp=2) CPU
mesh over Gloo (init_device_mesh), with the same collectives per step (a tp
all-reduce and a dp all-reduce of 4 + pad floats), a checkpoint of each
rank's last steps in CHECKPOINT_DIR/rank<r> after every step, and resumption
from the last step every rank has. Run under torchrun --max-restarts=1: on
the first attempt (TORCHELASTIC_RESTART_COUNT=0) rank KILL_RANK SIGKILLs
itself at step KILL_STEP, the agent stops the other workers and restarts all
of them. Prints kill_ns=<unix ns> before the kill and first_step_ns=<unix ns>
when the first step after a resume completes.
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

SHARD = 4
HISTORY = 4


def read_checkpoint(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if parts:
                    out[int(parts[0])] = [float(v) for v in parts[1:]]
    except FileNotFoundError:
        pass
    return out


def write_checkpoint(path, ckpt):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for step in sorted(ckpt):
            f.write("%d %s\n" % (step, " ".join(repr(v) for v in ckpt[step])))
    os.rename(tmp, path)


def main():
    steps = int(os.environ.get("STEPS", "24"))
    kill_rank = int(os.environ.get("KILL_RANK", "-1"))
    kill_step = int(os.environ.get("KILL_STEP", "10"))
    pad = int(os.environ.get("PAD", str(1 << 16)))
    ckpt_dir = os.environ["CHECKPOINT_DIR"]
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    # The agent's store keeps the first attempt's keys, and the restarted
    # workers' Gloo groups (same names) then read the dead attempt's
    # addresses ("Connection refused" in connectFullMesh; torch 2.15.0,
    # seen here). A store prefix per attempt, as torchft does, avoids it.
    store = dist.TCPStore(os.environ["MASTER_ADDR"],
                          int(os.environ["MASTER_PORT"]), world,
                          is_master=False)
    dist.init_process_group("gloo", store=dist.PrefixStore(
        "recovery_bench/attempt_%d" % attempt, store), rank=rank,
        world_size=world)
    mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    replica = mesh.get_local_rank("dp")
    shard = mesh.get_local_rank("tp")
    path = os.path.join(ckpt_dir, "rank%d" % rank)
    ckpt = read_checkpoint(path)
    newest = torch.tensor([max(ckpt) if ckpt else -1], dtype=torch.int64)
    for g in (dp, tp):
        dist.all_reduce(newest, op=dist.ReduceOp.MIN, group=g)
    done = 0
    params = torch.tensor([float(shard * SHARD + j) for j in range(SHARD)])
    report_next = False
    if newest.item() >= 0 and newest.item() in ckpt:
        done = newest.item()
        params = torch.tensor(ckpt[done])
        report_next = True
    buf = torch.zeros(SHARD + pad)
    while done < steps:
        if attempt == 0 and rank == kill_rank and done == kill_step:
            print("kill_ns=%d" % time.time_ns(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        buf.zero_()
        buf[0] = params.sum()
        dist.all_reduce(buf, group=tp)
        total = buf[0].item()
        buf.zero_()
        for j in range(SHARD):
            buf[j] = (done + replica + j + total) % 5 + 1
        dist.all_reduce(buf, group=dp)
        params = torch.fmod(params + buf[:SHARD], 1000.0)
        done += 1
        ckpt[done] = params.tolist()
        for old in sorted(ckpt)[:-HISTORY]:
            del ckpt[old]
        write_checkpoint(path, ckpt)
        if report_next:
            report_next = False
            print("first_step_ns=%d" % time.time_ns(), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
