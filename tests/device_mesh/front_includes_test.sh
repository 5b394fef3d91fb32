#!/bin/bash
# devmesh/tests/device_mesh/front_includes_test.sh
# device_mesh/ includes comm's front headers only (comm/<name>.h), never a
# file of a backend's package (comm/nccl/, comm/shm/, comm/two_level/, ...):
# a backend is reached through the registry, its option codec and
# comm/auto_group.h. Arguments: every source and header of //device_mesh.
# Prints each offending include and fails; prints the count checked.
set -u
files=0
bad=0
for f in "$@"; do
  files=$((files + 1))
  while IFS= read -r line; do
    echo "includes a backend's file: $f: $line"
    bad=$((bad + 1))
  done < <(grep -n '^#include "comm/[^"]*/' "$f")
done
if [ "$files" -eq 0 ]; then
  echo "no files given"
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  echo "FAIL: $bad include(s) of a backend's file in $files device_mesh files"
  exit 1
fi
echo "ok: $files device_mesh files include comm's front headers only"
