"""torch.distributed.TCPStore as a client of devmesh's store server (argv:
host port). Exercises set, get, add, compare_set, wait (with a timeout),
check, delete_key, num_keys, multi_get, multi_set against exact values, and
leaves "py/done" = "yes" for the C++ side. Exit 0 when every check held."""
import datetime
import sys
import time

import torch.distributed as dist

host, port = sys.argv[1], int(sys.argv[2])
store = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=30))


def check(cond, what):
    if not cond:
        print("FAILED:", what, flush=True)
        sys.exit(1)


# Written by the C++ side before this script starts.
check(store.get("cpp/hello") == b"from devmesh", "get of a devmesh key")
store.set("py/k", "v1")
check(store.get("py/k") == b"v1", "set/get")
check(store.add("py/n", 5) == 5 and store.add("py/n", -2) == 3, "add")
check(store.get("py/n") == b"3", "add stores decimal text")
check(store.compare_set("py/cas", "", "first") == b"first", "cas create")
check(store.compare_set("py/cas2", "x", "y") == b"x", "cas missing, expected")
check(store.compare_set("py/cas", "wrong", "z") == b"first", "cas mismatch")
check(store.compare_set("py/cas", "first", "second") == b"second", "cas swap")
check(store.check(["py/k", "py/n"]), "check present")
check(not store.check(["py/k", "py/absent"]), "check absent")
start = time.monotonic()
try:
    store.wait(["py/absent"], datetime.timedelta(milliseconds=300))
    check(False, "wait on a missing key must time out")
except Exception as e:  # DistStoreError
    check("timeout" in str(e).lower(), "wait timeout message: %s" % e)
check(time.monotonic() - start >= 0.3, "wait waited")
store.set("py/after_timeout", "ok")  # the connection survived CANCEL_WAIT
store.wait(["py/k", "py/after_timeout"])
check(store.delete_key("py/k") and not store.delete_key("py/k"), "delete_key")
store.multi_set(["py/m1", "py/m2"], ["a", "bb"])
check(store.multi_get(["py/m2", "py/m1"]) == [b"bb", b"a"], "multi_get")
# cpp/hello, py/n, py/cas, py/after_timeout, py/m1, py/m2
check(store.num_keys() == 6, "num_keys is %d" % store.num_keys())
store.set("py/done", "yes")
print("all torch client checks passed", flush=True)
