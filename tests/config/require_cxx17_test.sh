#!/bin/bash
# Compiles a file that includes one public devmesh header, with the system
# C++ compiler (Abseil from /usr/include), under each -std value:
# - C++11 (Bazel's default -std=c++0x) and C++14 must fail with exactly two
#   error lines, config/require_cxx17.h's #error naming the fix and the
#   include that ends the compile, and nothing else (no Abseil or C++17
#   syntax errors after it);
# - C++17 and later must compile.
set -u
cxx="${CXX:-c++}"
headers=(mesh/mesh_layout.h mesh/auto_shape.h mesh/cart_shift.h
         mesh/rank_table.h status/status_macros.h)
fix="error: #error \"devmesh needs C++17: add 'build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17' to your .bazelrc, or import devmesh's ('import %workspace%/path/to/devmesh/.bazelrc')\""
stop="fatal error: devmesh_stops_here_without_cxx17_see_the_error_above: No such file or directory"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failed=0
for h in "${headers[@]}"; do
  printf '#include "%s"\nint main() { return 0; }\n' "$h" > "$tmp/tu.cc"
  for std in c++0x c++14; do
    out="$("$cxx" -std="$std" -fsyntax-only -I. "$tmp/tu.cc" 2>&1)"
    rc=$?
    errors="$(grep -E ': (fatal )?error:' <<<"$out" | sed -E 's/^[^ ]*: (fatal )?error/\1error/')"
    want="$(printf '%s\n%s' "$fix" "$stop")"
    if [[ $rc -eq 0 ]]; then
      echo "FAIL $h -std=$std: compiled"; failed=1
    elif [[ "$errors" != "$want" ]]; then
      echo "FAIL $h -std=$std: error lines are not exactly the two expected:"
      echo "$out" | head -20; failed=1
    else
      echo "ok   $h -std=$std: stopped by config/require_cxx17.h"
    fi
  done
  for std in c++17 gnu++17 c++20; do
    if out="$("$cxx" -std="$std" -fsyntax-only -I. "$tmp/tu.cc" 2>&1)"; then
      echo "ok   $h -std=$std: compiles"
    else
      echo "FAIL $h -std=$std: does not compile:"; echo "$out" | head -20
      failed=1
    fi
  done
done
exit $failed
