#!/usr/bin/env bash
# Creates the virtual environment that devmesh's interop tests and peer
# benchmarks use to run real PyTorch peers (torchrun, torch.distributed's
# TCPStore and DeviceMesh). devmesh itself needs no Python: this is a
# separate step from tools/install.sh, for CI and for developers who want
# the tests against real peers to run instead of skipping.
#
#   tools/install_torch.sh          # venv at $DEVMESH_TORCH_VENV, default /opt/devmesh/torch-venv
#
# Idempotent: an existing venv whose torch imports is left alone. PyPI's
# Linux wheel of torch is the CUDA build (about 5.3 GB with its nvidia-*
# wheels; `pip install --no-deps torch` does not import: libcufile.so.0
# missing). Measured on a 2-core CI-class machine: about 1 min 15 s.
set -euo pipefail

VENV="${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}"
TORCH_SPEC="${DEVMESH_TORCH_SPEC:-torch==2.15.0}"

if [ -x "$VENV/bin/python" ] &&
   "$VENV/bin/python" -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
  echo "install_torch.sh: $VENV already has $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'); nothing to do."
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$VENV")" ]; then SUDO="sudo"; fi
$SUDO mkdir -p "$(dirname "$VENV")"
if ! python3 -m venv --help >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv
fi
start=$(date +%s)
$SUDO python3 -m venv "$VENV"
$SUDO "$VENV/bin/pip" install --quiet --disable-pip-version-check "$TORCH_SPEC" numpy
"$VENV/bin/python" -c 'import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()'
echo "install_torch.sh: installed $TORCH_SPEC into $VENV in $(( $(date +%s) - start )) s"
