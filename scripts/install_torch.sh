#!/usr/bin/env bash
# Install a torch that fits this machine *before* the package, so pip never pulls a multi-GB CUDA build
# onto a machine without a GPU.  Usage: scripts/install_torch.sh PATH/TO/python
#   - torch already importable: nothing to do;
#   - an NVIDIA GPU is present (nvidia-smi works): the default (CUDA) build from PyPI;
#   - otherwise: the CPU build from PyTorch's CPU index, or, where that index is unreachable (the course's
#     CI machines), torch==2.13.0, which those machines serve as a CPU wheel from local disk.
set -euo pipefail
py=${1:-python3}
range='torch>=2.2,<3'
if "$py" -c 'import torch' 2>/dev/null; then
  echo "torch $("$py" -c 'import torch; print(torch.__version__)') already installed"
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
  echo "NVIDIA GPU found: installing the CUDA build of torch"
  exec "$py" -m pip install "$range"
fi
echo "no NVIDIA GPU: installing a CPU-only torch"
# Only PyTorch's CPU index (the machine's pip configuration could add indexes that serve CUDA builds).
if ! PIP_CONFIG_FILE=/dev/null "$py" -m pip install --timeout 20 --retries 1 \
    --index-url https://download.pytorch.org/whl/cpu "$range"; then
  echo "PyTorch's CPU index is unreachable; trying torch==2.13.0 (a CPU wheel on the course's CI machines)"
  "$py" -m pip install torch==2.13.0
fi
"$py" - <<'PY'
import sys, torch
if torch.version.cuda is not None:
    sys.exit(f"installed torch {torch.__version__} is a CUDA build on a machine without a GPU; "
             "install a CPU build by hand: pip install torch --index-url https://download.pytorch.org/whl/cpu")
print("torch", torch.__version__, "(CPU build)")
PY
