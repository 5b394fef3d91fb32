#!/usr/bin/env bash
# Builds fuzz/frame_parser_fuzz.cc with clang's libFuzzer (+ ASan/UBSan) against
# Debian's Abseil and runs it.
#   fuzz/run_fuzz.sh [RUNS]     (default 1000000 executions)
# Output: fuzz_out/frame_parser_fuzz, corpus in fuzz_out/corpus (git-ignored), and the
# final "Done N runs" line of libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-1000000}"
OUT=fuzz_out
mkdir -p "$OUT/corpus"
CXX="${CXX:-clang++-14}"
ABSL_LIBS=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[^.]*\)\.so|-l\1|')
"$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. \
  fuzz/frame_parser_fuzz.cc bootstrap/wire_format.cc bootstrap/store_limits.cc \
  bootstrap/kv_table.cc bootstrap/store_service.cc \
  $ABSL_LIBS -o "$OUT/frame_parser_fuzz"
# Seeds: a hello and a few requests, as raw frames.
printf '\x0d\x00\x00\x00\x01DMVS\x01\x00\x00\x00\x00\x00\x00\x00' > "$OUT/corpus/hello"
printf '\x0b\x00\x00\x00\x02\x01\x00\x00\x00k\x01\x00\x00\x00v' > "$OUT/corpus/set"
"$OUT/frame_parser_fuzz" -runs="$RUNS" -max_len=4096 -print_final_stats=1 \
  "$OUT/corpus" 2>&1 | tail -25
