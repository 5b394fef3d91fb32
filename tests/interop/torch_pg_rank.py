"""A PyTorch rank under //bootstrap:launch --host_store: the launcher hosts
the store and sets TORCHELASTIC_USE_AGENT_STORE=True, so
init_process_group(env://) joins the launcher's store as a c10d client
instead of binding MASTER_PORT. All-reduces rank+1 over Gloo, passes two
barriers, pushes its rank to a queue of the default store that rank 0
drains; prints one line with what it saw."""
import datetime
import os

import torch
import torch.distributed as dist

assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
store = dist.distributed_c10d._get_default_store()
store.queue_push("ranks", str(rank))
dist.barrier()
popped = ""
if rank == 0:
    popped = " popped " + ",".join(
        sorted(store.queue_pop("ranks").decode() for _ in range(world)))
dist.barrier()
print("rank %d sum %d%s" % (rank, int(t.item()), popped), flush=True)
dist.destroy_process_group()
