"""One rank of the per-dim all-gather and reduce-scatter through PyTorch's
DeviceMesh groups (Gloo), the peer of devmesh's bench/collectives_2d.cc.

Run by spawn.py with the venv's python:
  python torch_collectives.py --shape 2x2 --names dp,tp \
      --sizes 1048576,16777216 --ops all_gather,reduce_scatter --iters 20 \
      --warmup 5
Sizes are nccl-tests' (and collectives_2d's): the full buffer, group size x
block (all_gather_into_tensor's output, reduce_scatter_tensor's input),
float32, sum. Measured as collectives_2d measures: per (op, size, dim)
--warmup untimed calls, then --iters timed runs of batch_size(bytes)
back-to-back calls (stats.py) started after a barrier over a Gloo group of
its own; a run's time is its slowest rank's; seconds = median over runs of
run time / batch. A fresh pattern (rank + 1 everywhere) goes through once
after timing and every element is checked. Rank 0 prints per cell:
  PEER_BENCH_COLLECTIVE {"op":..,"dim":..,"bytes":..,"group_size":..,
                         "batch":..,"iters":..,"seconds":..,"wrong":..}
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
    p.add_argument("--ops", default="all_gather,reduce_scatter")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    shape = tuple(int(s) for s in a.shape.split("x"))
    names = tuple(a.names.split(","))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    metrics = dist.new_group(backend="gloo")  # barriers and figures only
    groups = [mesh.get_group(d) for d in range(len(shape))]
    for op in a.ops.split(","):
        for nbytes in (int(s) for s in a.sizes.split(",")):
            for d, g in enumerate(groups):
                n = dist.get_world_size(g)
                count = nbytes // 4 // n  # one block
                block = torch.full((count,), float(rank + 1))
                full = torch.full((count * n,), float(rank + 1))
                if op == "all_gather":
                    def call():
                        dist.all_gather_into_tensor(full, block, group=g)
                elif op == "reduce_scatter":
                    def call():
                        dist.reduce_scatter_tensor(block, full, group=g)
                else:
                    raise SystemExit("unknown op " + op)
                batch = stats.batch_size(count * n * 4)
                for _ in range(a.warmup):
                    call()
                times = []
                for _ in range(a.iters):
                    dist.barrier(group=metrics)
                    t0 = time.perf_counter()
                    for _ in range(batch):
                        call()
                    times.append((time.perf_counter() - t0) / batch)
                mine = torch.tensor(times, dtype=torch.float64)
                every = [torch.zeros_like(mine) for _ in range(world)]
                dist.all_gather(every, mine, group=metrics)
                slowest = torch.stack(every).max(dim=0).values.tolist()
                members = dist.get_process_group_ranks(g)
                block.fill_(float(rank + 1))
                full.fill_(float(rank + 1))
                call()
                if op == "all_gather":
                    want = torch.tensor([float(r + 1) for r in members]
                                        ).repeat_interleave(count)
                    wrong = int((full != want).sum())
                else:
                    want = float(sum(r + 1 for r in members))
                    wrong = int((block != want).sum())
                w = torch.tensor([wrong], dtype=torch.int64)
                dist.all_reduce(w, group=metrics)
                if rank == 0:
                    print("PEER_BENCH_COLLECTIVE {\"op\":\"%s\",\"dim\":\"%s\","
                          "\"bytes\":%d,\"group_size\":%d,\"batch\":%d,"
                          "\"iters\":%d,\"seconds\":%.9g,\"wrong\":%d}" % (
                              op, names[d], count * n * 4, n, batch, a.iters,
                              stats.median(slowest), int(w.item())),
                          flush=True)
    dist.barrier(group=metrics)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
