#!/bin/sh
# torchrun --no-python entry of the mixed job: rank 0 runs Python, the others
# devmesh's mesh_worker. Paths come from torchrun_test.sh.
if [ "$RANK" = 0 ]; then
  exec "$MIXED_PYTHON" "$MIXED_SCRIPT"
fi
exec "$MIXED_WORKER" mixed
