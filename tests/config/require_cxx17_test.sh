#!/bin/bash
# Compiles devmesh's headers (the files given as arguments: every header of
# //mesh, //store, //sync, //comm, //bootstrap and //device_mesh, and //status's) with
# the system C++ compiler (Abseil, Gloo and libuv from /usr/include):
# - under C++11 (Bazel's default -std=c++0x) and C++14, a file that includes
#   any one header must fail with exactly two error lines,
#   config/require_cxx17.h's #error naming the fix and the include that ends
#   the compile, and nothing else (no Abseil or C++17 syntax errors after it);
# - under C++17 and later, a file that includes them all must compile.
set -u
cxx="${CXX:-c++}"
if [[ $# -eq 0 ]]; then echo "usage: $0 HEADER..." >&2; exit 2; fi
# The NCCL backend's implementation header needs the CUDA toolkit's headers;
# where there is none (Bazel then builds //comm:nccl without it), it is left out.
cuda_include=/usr/local/cuda/include
include_flags=(-I.)
if [[ -f "$cuda_include/nccl.h" && -f "$cuda_include/cuda_runtime_api.h" ]]; then
  include_flags+=(-isystem "$cuda_include")
fi
headers=()
for h in "$@"; do
  case "$h" in
    config/*) ;;  # the check itself
    comm/nccl/nccl_communicator_impl.h)
      if [[ ${#include_flags[@]} -gt 1 ]]; then headers+=("$h")
      else echo "note: $h left out (no CUDA toolkit in $cuda_include)"; fi ;;
    *) headers+=("$h") ;;
  esac
done
fix="error: #error \"devmesh needs C++17: add 'build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17' to your .bazelrc, or import devmesh's ('import %workspace%/path/to/devmesh/.bazelrc')\""
stop="fatal error: devmesh_stops_here_without_cxx17_see_the_error_above: No such file or directory"
want="$(printf '%s\n%s' "$fix" "$stop")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failed=0
stopped=0
for h in "${headers[@]}"; do
  printf '#include "%s"\nint main() { return 0; }\n' "$h" > "$tmp/tu.cc"
  for std in c++0x c++14; do
    out="$("$cxx" -std="$std" -fsyntax-only "${include_flags[@]}" "$tmp/tu.cc" 2>&1)"
    rc=$?
    errors="$(grep -E ': (fatal )?error:' <<<"$out" | sed -E 's/^[^ ]*: (fatal )?error/\1error/')"
    if [[ $rc -eq 0 ]]; then
      echo "FAIL $h -std=$std: compiled"; failed=1
    elif [[ "$errors" != "$want" ]]; then
      echo "FAIL $h -std=$std: error lines are not exactly the two expected:"
      echo "$out" | head -20; failed=1
    else
      stopped=$((stopped + 1))
    fi
  done
done
echo "C++11 and C++14: ${stopped} of $((2 * ${#headers[@]})) compiles stopped by config/require_cxx17.h with exactly its two lines"
: > "$tmp/all.cc"
for h in "${headers[@]}"; do printf '#include "%s"\n' "$h" >> "$tmp/all.cc"; done
echo 'int main() { return 0; }' >> "$tmp/all.cc"
for std in c++17 gnu++17 c++20; do
  if out="$("$cxx" -std="$std" -fsyntax-only "${include_flags[@]}" "$tmp/all.cc" 2>&1)"; then
    echo "ok   all ${#headers[@]} headers -std=$std: compile"
  else
    echo "FAIL all ${#headers[@]} headers -std=$std: do not compile:"
    echo "$out" | head -20
    failed=1
  fi
done
exit $failed
