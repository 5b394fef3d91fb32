#!/usr/bin/env bash
# Builds examples/consumer_no_cxx17 (a workspace on @devmesh//mesh without
# devmesh's .bazelrc, so without C++17) and checks that the build fails with
# config/require_cxx17.h's line naming the fix, and with no other compiler
# error. Shuts its Bazel server down on exit. Prints one table.
set -uo pipefail
cd "$(dirname "$0")/../examples/consumer_no_cxx17"
trap 'timeout 300 bazel shutdown >/dev/null 2>&1 || true' EXIT

fix="devmesh needs C++17: add 'build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17' to your .bazelrc"
out="$(timeout 900 bazel build //:mesh_info 2>&1)"
rc=$?
errors="$(grep -E ': (fatal )?error:' <<<"$out")"
n_errors="$(grep -c . <<<"$errors")"
n_fix="$(grep -cF -- "$fix" <<<"$errors")"
n_stop="$(grep -c 'devmesh_stops_here_without_cxx17' <<<"$errors")"

printf '%-34s %s\n' "check" "result"
printf '%-34s %s\n' "bazel build exit status" "$rc (want non-zero)"
printf '%-34s %s\n' "compiler error lines" "$n_errors (want 2)"
printf '%-34s %s\n' "the line naming the fix" "$n_fix (want 1)"
printf '%-34s %s\n' "the stop line" "$n_stop (want 1)"
if [[ $rc -ne 0 && $n_errors -eq 2 && $n_fix -eq 1 && $n_stop -eq 1 ]]; then
  echo "PASS: the build without C++17 says what is wrong"
  exit 0
fi
echo "FAIL; bazel's output:"
echo "$out" | tail -40
exit 1
