"""One rank of PyTorch's side of tools/overlap_bench.sh: compute overlapped
with an all-reduce (async_op=True) along each dim of a DeviceMesh (Gloo),
against the same work serialized, measured as bench/overlap.cc measures
devmesh's: float32, max, --bytes; a kernel (a dependent multiply-add pass
over a 64 KiB float32 tensor, repeated) calibrated to the blocking
all-reduce's time, the largest repeat count of the group; --iters runs of
each form after a barrier on a Gloo group of its own, the slowest rank's
time, the median over runs. Rank 0 prints per dim:
  OVERLAP {"side":"torch","dim":..,"group_size":..,"bytes":..,"comm_s":..,
           "compute_s":..,"serial_s":..,"overlap_s":..,"wrong":..}
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def kernel(a, repeats):
    for _ in range(repeats):
        a.mul_(0.999999).add_(0.5)


def slowest(metrics, values):
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=metrics)
    return t.tolist()


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="2x2")
    p.add_argument("--names", default="dp,tp")
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    shape = tuple(int(s) for s in a.shape.split("x"))
    names = tuple(a.names.split(","))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    metrics = dist.new_group(backend="gloo")
    for d, name in enumerate(names):
        g = mesh.get_group(d)
        buf = torch.full((a.bytes // 4,), float(rank + 1))
        work = torch.ones(16384)
        comm = []
        for i in range(a.warmup + a.iters):
            dist.barrier(group=metrics)
            t0 = time.perf_counter()
            dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=g)
            if i >= a.warmup:
                comm.append(time.perf_counter() - t0)
        comm_s = median(slowest(metrics, comm))
        repeats = 1
        while True:
            t0 = time.perf_counter()
            kernel(work, repeats)
            t = time.perf_counter() - t0
            if t >= comm_s or repeats > (1 << 30):
                repeats = max(1, int(repeats * comm_s / max(t, 1e-9)))
                break
            repeats *= 2
        r = torch.tensor([repeats], dtype=torch.int64)
        dist.all_reduce(r, op=dist.ReduceOp.MAX, group=metrics)
        repeats = int(r.item())
        compute, serial, overlap = [], [], []
        for i in range(a.warmup + a.iters):
            dist.barrier(group=metrics)
            t0 = time.perf_counter()
            kernel(work, repeats)
            k = time.perf_counter() - t0
            dist.barrier(group=metrics)
            t0 = time.perf_counter()
            dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=g)
            kernel(work, repeats)
            ser = time.perf_counter() - t0
            dist.barrier(group=metrics)
            t0 = time.perf_counter()
            w = dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=g,
                                async_op=True)
            kernel(work, repeats)
            w.wait()
            ovl = time.perf_counter() - t0
            if i >= a.warmup:
                compute.append(k)
                serial.append(ser)
                overlap.append(ovl)
        n = len(compute)
        s = slowest(metrics, compute + serial + overlap)
        want = float(max(dist.get_process_group_ranks(g)) + 1)
        wrong = torch.tensor([int((buf != want).sum())], dtype=torch.int64)
        dist.all_reduce(wrong, group=metrics)
        if rank == 0:
            print("OVERLAP " + json.dumps({
                "side": "torch", "dim": name,
                "group_size": dist.get_world_size(g), "bytes": a.bytes,
                "comm_s": comm_s, "compute_s": median(s[:n]),
                "serial_s": median(s[n:2 * n]),
                "overlap_s": median(s[2 * n:]),
                "wrong": int(wrong.item())}), flush=True)
    dist.barrier(group=metrics)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
