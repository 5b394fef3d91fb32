#!/bin/bash
# Compiles each case of typed_collectives_nocompile.cc with the system C++
# compiler (devmesh's headers from the runfiles, Abseil from /usr/include) and
# checks that case 0 compiles and that each other case fails with its
# static_assert message.
set -u
cxx="${CXX:-c++}"
src=tests/comm/typed_collectives_nocompile.cc
no_type="devmesh: this element type has no devmesh::DataType; typed collectives take float, double, int8_t, uint8_t, int32_t, int64_t, devmesh::Float16 or devmesh::BFloat16"
read_only="devmesh: a typed collective's receive span must be mutable"
expect=("" "$no_type" "$no_type" "$no_type" "$read_only")
failed=0
for c in 0 1 2 3 4; do
  out="$("$cxx" -std=c++17 -fsyntax-only -I. -DDEVMESH_NOCOMPILE_CASE="$c" \
    "$src" 2>&1)"
  rc=$?
  if [[ $c -eq 0 ]]; then
    if [[ $rc -ne 0 ]]; then
      echo "case 0 should compile but did not:"; echo "$out"; failed=1
    fi
  elif [[ $rc -eq 0 ]]; then
    echo "case $c compiled but must not"; failed=1
  elif ! grep -qF -- "${expect[$c]}" <<<"$out"; then
    echo "case $c failed without the message '${expect[$c]}':"
    echo "$out" | head -20; failed=1
  else
    echo "case $c: rejected with: $(grep -m1 -F -- "${expect[$c]}" <<<"$out" | sed 's/.*error: //')"
  fi
done
exit $failed
