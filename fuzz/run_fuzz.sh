#!/usr/bin/env bash
# Builds the fuzz targets with clang's libFuzzer (+ ASan/UBSan) against
# Debian's Abseil and runs each:
#   frame_parser_fuzz  devmesh's wire format and the store service
#   c10d_session_fuzz  the c10d decoder and the server's c10d session
#   fuzz/run_fuzz.sh [RUNS] [TARGET...]   (default 1000000 executions, both)
# Output: fuzz_out/<target>, corpora in fuzz_out/<target>.corpus (git-ignored),
# and libFuzzer's final stats ("Done N runs") per target.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-1000000}"
OUT=fuzz_out
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} = 0 ] && TARGETS=(frame_parser_fuzz c10d_session_fuzz)
# FUZZ_CXX, not CXX: an inherited CXX=g++ cannot build -fsanitize=fuzzer.
CXX="${FUZZ_CXX:-clang++-14}"
ABSL_LIBS=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[^.]*\)\.so|-l\1|')
COMMON_SRCS=(store/wire_format.cc store/store_limits.cc
             store/kv_table.cc store/store_service.cc)
for target in "${TARGETS[@]}"; do
  corpus="$OUT/$target.corpus"
  mkdir -p "$corpus"
  extra=()
  case "$target" in
    frame_parser_fuzz)
      # Seeds: a hello and a set, as raw frames.
      printf '\x0d\x00\x00\x00\x01DMVS\x01\x00\x00\x00\x00\x00\x00\x00' > "$corpus/hello"
      printf '\x0b\x00\x00\x00\x02\x01\x00\x00\x00k\x01\x00\x00\x00v' > "$corpus/set" ;;
    c10d_session_fuzz)
      extra=(store/c10d_wire_format.cc store/c10d_session.cc)
      # Seeds (after the first, chunk-size byte): SET /k v; WAIT [/k];
      # ADD /n 1; CANCEL_WAIT.
      printf '\x40\x01\x02\x00\x00\x00\x00\x00\x00\x00/k\x01\x00\x00\x00\x00\x00\x00\x00v' > "$corpus/set"
      printf '\x40\x06\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00/k\x0c' > "$corpus/wait"
      printf '\x40\x04\x02\x00\x00\x00\x00\x00\x00\x00/n\x01\x00\x00\x00\x00\x00\x00\x00' > "$corpus/add"
      # QUEUE_PUSH /q v; WAIT [/q]; QUEUE_POP /q; QUEUE_LEN /q; BARRIER /b 2.
      printf '\x40\x0e\x02\x00\x00\x00\x00\x00\x00\x00/q\x01\x00\x00\x00\x00\x00\x00\x00v\x06\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00/q\x0f\x02\x00\x00\x00\x00\x00\x00\x00/q' > "$corpus/queue"
      printf '\x40\x10\x02\x00\x00\x00\x00\x00\x00\x00/q\x12\x02\x00\x00\x00\x00\x00\x00\x00/b\x02\x00\x00\x00\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x00\x00\x00/b\x01\x00\x00\x00\x00\x00\x00\x00x\x0c' > "$corpus/barrier" ;;
    *) echo "unknown fuzz target $target" >&2; exit 2 ;;
  esac
  "$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I. \
    "fuzz/$target.cc" "${COMMON_SRCS[@]}" "${extra[@]}" \
    $ABSL_LIBS -o "$OUT/$target"
  echo "== $target"
  # Crash and leak inputs go to fuzz_out/ (git-ignored), not the tree.
  "$OUT/$target" -runs="$RUNS" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$OUT/$target." \
    "$corpus" 2>&1 | tail -25
done
