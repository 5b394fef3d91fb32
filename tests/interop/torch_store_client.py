"""torch.distributed.TCPStore as a client of devmesh's store server (argv:
host port). Exercises set, get, add, compare_set, wait (with a timeout),
check, delete_key, num_keys, multi_get, multi_set, append (then set, seen
by a second client), list_keys and the empty key against exact values;
checks that the calls devmesh does not serve (queues, barrier) raise or
lose data exactly as the README says; leaves "py/done" = "yes" for the C++
side. Exit 0 when every check held."""
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

# append and set read no reply: both must land (a second client sees them).
store.append("py/ap", "x")  # creates
store.append("py/ap", "yz")  # concatenates
store.set("py/after_append", "1")
other = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=30))
check(other.check(["py/after_append"]), "set after append seen by another")
check(other.get("py/ap") == b"xyz", "append seen by another client")
check(store.get("py/after_append") == b"1", "the appending client lives")
# The empty key, as torch's own server stores it.
store.set("", "e")
store.append("", "f")
check(other.get("") == b"ef" and other.check([""]), "empty key")
check(store.delete_key(""), "delete of the empty key")
check(store.num_keys() == 8, "num_keys is %d" % store.num_keys())
keys = ["cpp/hello", "py/after_append", "py/after_timeout", "py/ap", "py/cas",
        "py/m1", "py/m2", "py/n"]
listed = sorted(other.list_keys())
check(listed == keys, "list_keys: %s" % listed)


def unserved(call):
    """A call devmesh's server does not serve, on a store object of its own:
    "raises" when the call raises, "lost" when it returns and a following
    set on the same object never lands (whether or not that set raises)."""
    s = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=5))
    try:
        call(s)
    except Exception:
        return "raises"
    try:
        s.set("py/probe", "1")
    except Exception:
        pass
    time.sleep(0.2)
    return "lost" if not other.check(["py/probe"]) else "served"


# What the README says about the calls devmesh does not serve.
check(unserved(lambda s: s.queue_push("py/q", "v")) == "lost", "queue_push")
check(unserved(lambda s: s.queue_pop("py/q", False)) == "raises", "queue_pop")
check(unserved(lambda s: s.queue_len("py/q")) == "raises", "queue_len")
check(unserved(lambda s: s.barrier("py/b", 1)) == "raises", "barrier")
check(store.num_keys() == 8, "num_keys is %d" % store.num_keys())
store.set("py/done", "yes")
print("all torch client checks passed", flush=True)
