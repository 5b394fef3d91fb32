"""One rank of the per-dim all-reduce through PyTorch's DeviceMesh groups
(Gloo), the peer of devmesh's bench/allreduce_2d.cc mesh groups.

Run by spawn.py with the venv's python:
  python torch_allreduce.py --shape 2x2 --names dp,tp --sizes 1024,2048 \
      --iters 20 --warmup 5
Measures as allreduce_2d does: every group first does --warmup all-reduces
of the largest size; then per size and dim, --warmup untimed all-reduces and
--iters timed runs; a run is batch_size(bytes) back-to-back all-reduces
(stats.py, allreduce_2d's BatchSize) started right after a barrier of every
rank over a Gloo group of its own (so the groups under test are not warmed
by it), and its time is its slowest rank's. float32 sum. PyTorch's
all_reduce is in place, so the timed runs reduce one buffer over and over
(its values may overflow to inf: Gloo's float sum costs the same); a
separate all-reduce of a fresh pattern (rank + 1 everywhere) is checked
element by element afterwards. Rank 0 prints, per (dim, size):
  PEER_BENCH_ALLREDUCE {"dim":..,"bytes":..,"group_size":..,"batch":..,
                        "iters":..,"seconds":..,"wrong":..}
seconds: median over runs of the run time / batch (per all-reduce).
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="2x2")
    p.add_argument("--names", default="dp,tp")
    p.add_argument("--sizes", required=True, help="bytes, comma-separated")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    shape = tuple(int(s) for s in a.shape.split("x"))
    names = tuple(a.names.split(","))
    sizes = [int(s) for s in a.sizes.split(",")]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    metrics = dist.new_group(backend="gloo")  # barriers and figures only
    groups = [mesh.get_group(d) for d in range(len(shape))]
    largest = torch.ones(max(sizes) // 4, dtype=torch.float32)
    for g in groups:
        for _ in range(a.warmup):
            dist.all_reduce(largest, group=g)
    del largest
    for nbytes in sizes:
        count = nbytes // 4
        buf = torch.full((count,), float(rank + 1), dtype=torch.float32)
        batch = stats.batch_size(count * 4)
        for d, g in enumerate(groups):
            for _ in range(a.warmup):
                dist.all_reduce(buf, group=g)
            times = []
            for _ in range(a.iters):
                dist.barrier(group=metrics)
                # One untimed all-reduce on the group lines its members up
                # after the barrier (as allreduce_2d does).
                dist.all_reduce(buf, group=g)
                t0 = time.perf_counter()
                for _ in range(batch):
                    dist.all_reduce(buf, group=g)
                times.append((time.perf_counter() - t0) / batch)
            mine = torch.tensor(times, dtype=torch.float64)
            every = [torch.zeros_like(mine) for _ in range(world)]
            dist.all_gather(every, mine, group=metrics)
            slowest = torch.stack(every).max(dim=0).values.tolist()
            check = torch.full((count,), float(rank + 1), dtype=torch.float32)
            dist.all_reduce(check, group=g)
            members = dist.get_process_group_ranks(g)
            want = float(sum(r + 1 for r in members))
            wrong = torch.tensor([int((check != want).sum())], dtype=torch.int64)
            dist.all_reduce(wrong, group=metrics)
            if rank == 0:
                print("PEER_BENCH_ALLREDUCE {\"dim\":\"%s\",\"bytes\":%d,"
                      "\"group_size\":%d,\"batch\":%d,\"iters\":%d,"
                      "\"seconds\":%.9g,\"wrong\":%d}" % (
                          names[d], count * 4, len(members), batch, a.iters,
                          stats.median(slowest), int(wrong.item())), flush=True)
    dist.barrier(group=metrics)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
