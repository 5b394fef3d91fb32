"""PyTorch's DeviceMesh layout operations as a user calls them, the peer of
devmesh's bench/mesh_ops_peer.cc (same meshes, same rank, same figures).

  python torch_layout.py --worlds 8,1024,32768,1048576 --samples 7 --calls 200
  python torch_layout.py --memory 1048576

At each world size W: a process group of the "fake" backend (PyTorch's own,
torch.testing._internal.distributed.fake_pg: no peers, no traffic) with
rank W/2 + 3 of W, and the mesh init_device_mesh("cpu", (a, W/a),
mesh_dim_names=("dp", "tp")), a = 2^floor(log2(W)/2). A mesh made with
DeviceMesh(..., _init_backend=False) cannot be sliced or flattened (it has
no dim groups), so the fake backend is how PyTorch builds a mesh of any
size in one process. Operations: build (init_device_mesh), slice
(mesh["dp"]), flatten (mesh._flatten(), name "dp_tp"), get_coordinate,
get_local_rank("tp"). "first": median over --samples of one call on a fresh
mesh (PyTorch caches slices and flattens on the root, so later calls are
cheaper); "repeat": median over samples of the mean of up to --calls
back-to-back calls on one mesh (stopping after 0.2 s of calls). Before any
timing, one mesh of 8 is built, sliced and flattened untimed (the first
slice in a process costs about 1 s of one-time set-up). Prints
  PEER_BENCH_LAYOUT {"op":..,"world":..,"first_ns":..,"repeat_ns":..}
--memory W prints the heap (glibc mallinfo2: uordblks + hblkhd) and
resident-set (VmRSS) growth from building one mesh of W ranks, kept alive:
  PEER_BENCH_MEMORY {"world":W,"heap_bytes":..,"rss_bytes":..}
"""
import argparse
import ctypes
import gc
import os
import sys
import time

import torch  # noqa: F401
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402

OPS = ("build", "slice", "flatten", "get_coordinate", "get_local_rank")


def shape_of(world):
    a = 1 << (world.bit_length() - 1) // 2
    return (a, world // a)


def fake_world(world):
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=world // 2 + 3,
                            world_size=world)


def build(world):
    return init_device_mesh("cpu", shape_of(world), mesh_dim_names=("dp", "tp"))


def call(op, mesh, world):
    if op == "build":
        return build(world)
    if op == "slice":
        return mesh["dp"]
    if op == "flatten":
        return mesh._flatten()
    if op == "get_coordinate":
        c = mesh.get_coordinate()
        if c is None:
            sys.exit("get_coordinate: rank not in its own mesh")
        return c
    if op == "get_local_rank":
        return mesh.get_local_rank("tp")
    raise ValueError(op)


def time_op(op, world, samples, calls):
    first, repeat = [], []
    for _ in range(samples):
        mesh = None if op == "build" else build(world)
        t0 = time.perf_counter_ns()
        call(op, mesh, world)
        first.append(time.perf_counter_ns() - t0)
        if op == "build":
            mesh = None
        made = 0
        t0 = time.perf_counter_ns()
        while made < calls:
            call(op, mesh, world)
            made += 1
            if time.perf_counter_ns() - t0 > 200_000_000:
                break
        repeat.append((time.perf_counter_ns() - t0) / made)
    print("PEER_BENCH_LAYOUT {\"op\":\"%s\",\"world\":%d,\"first_ns\":%.1f,"
          "\"repeat_ns\":%.1f}" % (op, world, stats.median(first),
                                   stats.median(repeat)), flush=True)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def heap_bytes():
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    mi = libc.mallinfo2()
    return mi.uordblks + mi.hblkhd


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return -1


def memory(world):
    fake_world(world)
    small = build(8)  # one-time set-up out of the figure; kept alive (see
    # bench/mesh_ops_peer.cc: freed chunks in tcache would hide the growth)
    gc.collect()
    heap0, rss0 = heap_bytes(), rss_bytes()
    mesh = build(world)
    gc.collect()
    heap1, rss1 = heap_bytes(), rss_bytes()
    assert mesh.size() == world and small.size() == 8
    print("PEER_BENCH_MEMORY {\"world\":%d,\"heap_bytes\":%d,\"rss_bytes\":%d}"
          % (world, heap1 - heap0, rss1 - rss0), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worlds", default="8,1024,32768,1048576")
    p.add_argument("--samples", type=int, default=7)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--memory", type=int, default=0)
    a = p.parse_args()
    if a.memory:
        memory(a.memory)
        return
    fake_world(8)
    warm = build(8)
    warm["dp"], warm._flatten()
    for world in (int(w) for w in a.worlds.split(",")):
        fake_world(world)
        for op in OPS:
            time_op(op, world, a.samples, a.calls)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
