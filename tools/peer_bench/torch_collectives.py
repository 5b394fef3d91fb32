"""One rank of the per-dim all-gather, reduce-scatter, reduce, gather,
scatter and all-to-all (uneven splits: all_to_all_single with split sizes)
through PyTorch's DeviceMesh groups (Gloo), the peer of devmesh's
bench/collectives_2d.cc (same sizes, root 0 of each group, same uneven
blocks).

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
                me = dist.get_rank(g)
                members = dist.get_process_group_ranks(g)
                root = members[0]  # root 0 of the group, as a global rank
                count = nbytes // 4 // n  # one block
                block = torch.full((count,), float(rank + 1))
                full = torch.full((count * n,), float(rank + 1))
                # all_to_all_v's uneven blocks, as collectives_2d's.
                def uneven(s, d):
                    return count // 2 + (count * ((s + d) % n) // (n - 1)
                                         if n > 1 else count // 2)
                send_splits = [uneven(me, p) for p in range(n)]
                recv_splits = [uneven(p, me) for p in range(n)]
                v_send = torch.zeros(sum(send_splits))
                v_recv = torch.zeros(sum(recv_splits))

                def v_fill():
                    chunks = [1000.0 * me + 10.0 * p
                              + (torch.arange(c) % 7).float()
                              for p, c in enumerate(send_splits)]
                    v_send.copy_(torch.cat(chunks) if chunks else v_send)
                    v_recv.fill_(-1.0)

                views = list(full.chunk(n)) if count > 0 else None
                if op == "all_gather":
                    def call():
                        dist.all_gather_into_tensor(full, block, group=g)
                elif op == "reduce_scatter":
                    def call():
                        dist.reduce_scatter_tensor(block, full, group=g)
                elif op == "reduce":
                    def call():
                        dist.reduce(full, dst=root, group=g)
                elif op == "gather":
                    def call():
                        dist.gather(block, views if rank == root else None,
                                    dst=root, group=g)
                elif op == "scatter":
                    def call():
                        dist.scatter(block, views if rank == root else None,
                                     src=root, group=g)
                elif op == "all_to_all_v":
                    v_fill()

                    def call():
                        dist.all_to_all_single(v_recv, v_send, recv_splits,
                                               send_splits, group=g)
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
                block.fill_(float(rank + 1))
                full.fill_(float(rank + 1))
                if op == "all_to_all_v":
                    v_fill()
                call()
                wrong = 0
                if op == "all_gather" or (op == "gather" and rank == root):
                    want = torch.tensor([float(r + 1) for r in members]
                                        ).repeat_interleave(count)
                    wrong = int((full != want).sum())
                elif op == "reduce_scatter":
                    want = float(sum(r + 1 for r in members))
                    wrong = int((block != want).sum())
                elif op == "reduce" and rank == root:
                    want = float(sum(r + 1 for r in members))
                    wrong = int((full != want).sum())
                elif op == "scatter":
                    wrong = int((block != float(root + 1)).sum())
                elif op == "all_to_all_v":
                    want = [1000.0 * p + 10.0 * me
                            + (torch.arange(c) % 7).float()
                            for p, c in enumerate(recv_splits)]
                    wrong = int((v_recv != torch.cat(want)).sum())
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
