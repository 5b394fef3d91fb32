"""Rank 0 of the mixed torchrun job: PyTorch's own client of torchrun's agent
store (as torch.distributed does with TORCHELASTIC_USE_AGENT_STORE=True).
Writes "from_torch" and reads the devmesh ranks' keys, all under devmesh's
namespace devmesh/<TORCHELASTIC_RUN_ID>/attempt_<TORCHELASTIC_RESTART_COUNT>."""
import datetime
import os
import sys

import torch.distributed as dist

assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True"
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                      is_master=False, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=60))
ns = "devmesh/%s/attempt_%s/" % (os.environ.get("TORCHELASTIC_RUN_ID") or "none",
                                 os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
store.set(ns + "from_torch", "t0")
for r in range(1, int(os.environ["WORLD_SIZE"])):
    got = store.get(ns + "from_devmesh/%d" % r).decode()
    if got != "d%d" % r:
        print("rank 0: from_devmesh/%d = %r" % (r, got), flush=True)
        sys.exit(1)
print("rank 0 (python) read %d devmesh keys" % (int(os.environ["WORLD_SIZE"]) - 1),
      flush=True)
