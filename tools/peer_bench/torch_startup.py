"""One rank of PyTorch's start-up, the peer of devmesh's bench/startup.cc.

Run by spawn.py (torchrun's variables in the environment) with the venv's
python: python torch_startup.py 4x2. From process start to "every per-dim
group usable": import torch, init_process_group("gloo") (env://, rank 0
hosts the TCPStore), init_device_mesh("cpu", shape, mesh_dim_names=(d0,
...)), then one all-reduce of one float on every dim's group, checked.
Prints one line with wall-clock nanoseconds, as startup.cc does:
  PEER_BENCH_STARTUP {"rank":R,"t0_ns":..,"main_ns":..,"import_ns":..,
                      "ready_ns":..,"communicators":C,"store_round_trips":null}
main_ns is the first line of this script (before import torch), import_ns
the end of the imports. "communicators" counts the process groups this rank
holds afterwards (torch.distributed's registry of groups: the default group
and every group init_device_mesh made that this rank belongs to; a
non-member of new_group gets none). Store round trips are not counted: they
happen inside c10d's C++ (Gloo's rendezvous), out of Python's sight.
"""
import time

MAIN_NS = time.time_ns()

import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402

IMPORT_NS = time.time_ns()


def main():
    shape = tuple(int(s) for s in sys.argv[1].split("x"))
    dist.init_process_group("gloo")
    names = tuple("d%d" % d for d in range(len(shape)))
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
    for d in range(len(shape)):
        group = mesh.get_group(d)
        t = torch.ones(1)
        dist.all_reduce(t, group=group)
        want = dist.get_world_size(group)
        if t.item() != want:
            sys.exit("dim %d: all-reduce of 1 gave %s, not %d" % (d, t.item(), want))
    ready_ns = time.time_ns()
    groups = len(dist.distributed_c10d._world.pg_map)
    print("PEER_BENCH_STARTUP {\"rank\":%d,\"t0_ns\":%s,\"main_ns\":%d,"
          "\"import_ns\":%d,\"ready_ns\":%d,\"communicators\":%d,"
          "\"store_round_trips\":null}" % (
              dist.get_rank(), os.environ.get("PEER_BENCH_T0_NS", MAIN_NS),
              MAIN_NS, IMPORT_NS, ready_ns, groups), flush=True)
    # As bench/startup.cc --hold_until_all_ready: a barrier per dim, in dim
    # order (every rank has printed), before the teardown.
    for d in range(len(shape)):
        dist.barrier(group=mesh.get_group(d))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
