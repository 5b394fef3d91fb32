#!/usr/bin/env bash
# Creates the virtual environment that devmesh's interop tests and peer
# benchmarks use to run real PyTorch peers (torchrun, torch.distributed's
# TCPStore and DeviceMesh, and torchft for tools/recovery_bench.sh). devmesh itself needs no Python: this is a
# separate step from tools/install.sh, for CI and for developers who want
# the tests against real peers to run instead of skipping.
#
#   tools/install_torch.sh          # venv at $DEVMESH_TORCH_VENV, default /opt/devmesh/torch-venv
#
# Idempotent: an existing venv whose torch imports and whose torchft is the
# pinned version is left alone; one with torch but without that torchft gets
# only torchft. torchft 0.2.0 (a cp311 manylinux wheel; its Lighthouse is in
# the wheel's native extension) requires torch >= 2.7 and opentelemetry's
# api, sdk and OTLP HTTP exporter (>= 1.39): pip keeps torch 2.15.0 and adds
# those; nothing clashes. PyPI's
# Linux wheel of torch is the CUDA build (about 5.3 GB with its nvidia-*
# wheels; `pip install --no-deps torch` does not import: libcufile.so.0
# missing). Measured on a 2-core CI-class machine: about 1 min 15 s.
set -euo pipefail

VENV="${DEVMESH_TORCH_VENV:-/opt/devmesh/torch-venv}"
TORCH_SPEC="${DEVMESH_TORCH_SPEC:-torch==2.15.0}"
TORCHFT_VERSION="0.2.0"

SUDO=""
if [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$VENV")" ]; then SUDO="sudo"; fi

# torchft imports with the venv's torch, and its Lighthouse and Manager load.
torchft_ok() {
  "$VENV/bin/python" - "$TORCHFT_VERSION" 2>/dev/null <<'PY'
import importlib.metadata as m, sys
import torch, torchft
from torchft import Manager, ProcessGroupGloo
from torchft._torchft import LighthouseServer
assert m.version("torchft") == sys.argv[1]
PY
}

if [ -x "$VENV/bin/python" ] &&
   "$VENV/bin/python" -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
  if torchft_ok; then
    echo "install_torch.sh: $VENV already has torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') and torchft $TORCHFT_VERSION; nothing to do."
    exit 0
  fi
  $SUDO "$VENV/bin/pip" install --quiet --disable-pip-version-check "torchft==$TORCHFT_VERSION"
  torchft_ok || { echo "install_torch.sh: torchft $TORCHFT_VERSION does not import in $VENV" >&2; exit 1; }
  echo "install_torch.sh: added torchft $TORCHFT_VERSION to $VENV (torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
  exit 0
fi
$SUDO mkdir -p "$(dirname "$VENV")"
if ! python3 -m venv --help >/dev/null 2>&1; then
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv
fi
start=$(date +%s)
$SUDO python3 -m venv "$VENV"
$SUDO "$VENV/bin/pip" install --quiet --disable-pip-version-check "$TORCH_SPEC" numpy \
  "torchft==$TORCHFT_VERSION"
"$VENV/bin/python" -c 'import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()'
torchft_ok || { echo "install_torch.sh: torchft $TORCHFT_VERSION does not import in $VENV" >&2; exit 1; }
echo "install_torch.sh: installed $TORCH_SPEC and torchft $TORCHFT_VERSION into $VENV in $(( $(date +%s) - start )) s"
