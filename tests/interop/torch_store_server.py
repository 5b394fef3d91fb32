"""Hosts torch.distributed.TCPStore (the libuv server, PyTorch's default) on
a free port for devmesh's C10dStoreClient; prints "port N", then answers
commands read line by line from stdin until EOF:
  get KEY         -> "value V" (the value of KEY, read by torch's own client)
  set KEY VALUE   -> "ok"
  num_keys        -> "num_keys N"
"""
import datetime
import sys

import torch.distributed as dist

store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=30))
print("port", store.port, flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "get":
        print("value", store.get(words[1]).decode(), flush=True)
    elif words[0] == "set":
        store.set(words[1], words[2])
        print("ok", flush=True)
    elif words[0] == "num_keys":
        print("num_keys", store.num_keys(), flush=True)
