"""torch.distributed.TCPStore as a client of devmesh's store server (argv:
host port). Exercises set, get, add, compare_set, wait (with a timeout),
check, delete_key, num_keys, multi_get, multi_set, append (then set, seen
by a second client), list_keys and the empty key against exact values; then queue_push /
queue_pop / queue_len / barrier with several clients (a blocking pop woken
by a push, a pop cancelled by its timeout, a barrier of 8 clients, a barrier
cancelled by its timeout), each followed by a set on the same store object
that a second client reads back; leaves "py/done" = "yes" for the C++ side.
Exit 0 when every check held."""
import datetime
import sys
import threading
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


# The queue ops and barrier, as torch 2.15's own server serves them, each
# followed by a set on the same store object that a second client reads
# back (nothing lost behind a request that reads no reply).
def set_after(s, tag):
    s.set("py/after_" + tag, tag)
    check(other.get("py/after_" + tag) == tag.encode(), "set after " + tag)


producer1 = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
producer2 = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
# Pushes read no reply: each client's queue_len (which does) fixes the order
# across the two connections.
producer1.queue_push("py/q", "a1")
check(producer1.queue_len("py/q") == 1, "queue_len after 1 push")
producer2.queue_push("py/q", "b1")
check(producer2.queue_len("py/q") == 2, "queue_len after 2 pushes")
producer1.queue_push("py/q", b"a2")
set_after(producer1, "push")
check(other.queue_len("py/q") == 3, "queue_len of 3 pushes")
set_after(other, "len")
check(store.queue_pop("py/q") == b"a1", "fifo 1")
check(store.queue_pop("py/q", False) == b"b1", "fifo 2 (non-blocking)")
check(other.queue_pop("py/q") == b"a2", "fifo 3 (another client)")
set_after(store, "pop")
check(store.queue_len("py/q") == 0, "queue empty")
try:
    store.queue_pop("py/q", False)
    check(False, "non-blocking pop of an empty queue must raise")
except dist.QueueEmptyError as e:
    check("queue is empty" in str(e), "empty pop message: %s" % e)
set_after(store, "empty_pop")
producer1.queue_push("py/q", "x")
check(producer1.queue_len("py/q") == 1, "queue_len 1")  # the push is in
check(other.queue_len("py/q") == 1 and not other.check(["py/q/"]),
      "queue_len 1 seen by another client")
check(other.check(["py/q"]), "check sees a non-empty queue")
check("py/q" not in other.list_keys(), "a queue is not a key")
check(other.queue_pop("py/q") == b"x", "pop of x")
check(not other.check(["py/q"]), "check of an empty queue")

# A blocking pop woken by a push from another client.
popped = []
def blocking_pop():
    start = time.monotonic()
    popped.append(producer2.queue_pop("py/jobs"))
    popped.append(time.monotonic() - start)
t = threading.Thread(target=blocking_pop)
t.start()
time.sleep(0.3)
check(not popped, "a blocking pop waits for a push")
producer1.queue_push("py/jobs", "job")
t.join(10)
check(popped and popped[0] == b"job" and popped[1] >= 0.3,
      "blocking pop woken by a push: %s" % popped)
set_after(producer2, "woken_pop")

# A blocking pop cancelled by its timeout; the connection goes on.
lonely = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                       timeout=datetime.timedelta(milliseconds=300))
start = time.monotonic()
try:
    lonely.queue_pop("py/nothing")
    check(False, "a blocking pop of an empty queue must time out")
except dist.DistStoreError as e:
    check("wait timeout after 300ms" in str(e), "pop timeout: %s" % e)
check(time.monotonic() - start >= 0.3, "the pop waited its timeout")
lonely.set_timeout(datetime.timedelta(seconds=30))
set_after(lonely, "cancelled_pop")
producer1.queue_push("py/nothing", "late")
check(lonely.queue_pop("py/nothing") == b"late", "pop after a cancelled pop")

# A barrier of 8 clients: nobody leaves before the eighth arrives.
barrier_stores = [
    dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                  timeout=datetime.timedelta(seconds=30)) for _ in range(8)]
left = []
threads = [threading.Thread(target=lambda s=s, i=i: (s.barrier("py/bar", 8),
                                                     left.append(i)))
           for i, s in enumerate(barrier_stores[:7])]
for t in threads:
    t.start()
time.sleep(0.3)
check(not left, "left the barrier early: %s" % left)
barrier_stores[7].barrier("py/bar", 8)
for t in threads:
    t.join(10)
check(sorted(left) == list(range(7)), "all left the barrier: %s" % left)
check(other.get("py/bar") == b"8", "the barrier's counter")
for i, s in enumerate(barrier_stores):
    set_after(s, "barrier%d" % i)

# A barrier cancelled by its timeout.
start = time.monotonic()
try:
    store.barrier("py/half_barrier", 2, datetime.timedelta(milliseconds=300))
    check(False, "a barrier of 2 with one client must time out")
except dist.DistStoreError as e:
    check("barrier timeout after 300ms" in str(e), "barrier timeout: %s" % e)
check(time.monotonic() - start >= 0.3, "the barrier waited its timeout")
set_after(store, "cancelled_barrier")
store.barrier("py/one", 1)
set_after(store, "barrier_of_one")
store.set("py/done", "yes")
print("all torch client checks passed", flush=True)
