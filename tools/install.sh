#!/usr/bin/env bash
# Installs everything devmesh needs from Debian's packages. Idempotent: packages already
# present are left alone, and the script says what it installed.
#
#   sudo tools/install.sh        (or as root)
set -euo pipefail

PACKAGES=(
  bazel-bootstrap      # Bazel 4.2.3 (the only Bazel that installs offline here)
  bazel-rules-java     # rules_java for Bazel's WORKSPACE suffix
  g++                  # the C++17 compiler
  libabsl-dev          # Abseil: status, strings, flags, synchronization, containers
  libgtest-dev         # GoogleTest
  libgmock-dev         # GoogleMock
  libbenchmark-dev     # Google Benchmark
  libgloo-dev          # Gloo: CPU collectives
  libuv1-dev           # libuv: the TCP store's event loop
  libucx-dev           # UCX: the "ucx" backend's transport across hosts
  ucx-utils            # ucx_info, ucx_perftest: what UCX sees on a host
  clang                # libFuzzer builds of the frame parser fuzz target
  libclang-rt-14-dev   # clang's sanitizer and fuzzer runtimes
  gnuplot-nox          # tools/plot_busbw.sh: busbw plot as PNG
  python3              # tools/plot_busbw.sh reads the benchmark JSON
  openmpi-bin          # tools/launcher_check.sh: a real mpirun
  libopenmpi-dev       # tools/peer_bench.sh: mpicc builds its Open MPI column
  slurm-wlm            # tools/launcher_check.sh: slurmctld, slurmd, srun, scontrol
  munge                # Slurm's authentication daemon
  iproute2             # tools/launcher_check.sh: network namespaces and veth pairs
  etcd-server          # the etcd store's tests start a real etcd (/usr/bin/etcd)
  etcd-client          # etcdctl: look at what the etcd store wrote
  libcurl4-openssl-dev # libcurl: the etcd store's HTTP client
  nlohmann-json3-dev   # nlohmann/json: the etcd store's JSON requests
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install.sh: all ${#PACKAGES[@]} packages already installed; nothing to do."
else
  echo "install.sh: installing ${#missing[@]} package(s): ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "install.sh: installed: ${missing[*]}"
fi

if [ -f /usr/local/cuda/include/nccl.h ] || [ -n "${CUDA_PATH:-}" ]; then
  echo "install.sh: CUDA toolkit found; //comm:nccl will be built with NCCL."
else
  echo "install.sh: no CUDA toolkit found (CUDA_PATH, /usr/local/cuda); NCCL backend will report Unavailable."
fi
