#!/usr/bin/env bash
# The course's GPU check, from a fresh clone:   bash scripts/gpu_check.sh        (or: make gpu-check)
#   1. installs (make setup: a .venv with the CUDA build of torch when nvidia-smi works, the package, MiniLM);
#   2. runs scripts/gpu_check.py offline: CUDA tests, bf16 fine-tuning of the course model and MiniLM, throughput
#      against transformers.Trainer (with and without --compile), 2 minutes of `small` pretraining, two processes
#      when two GPUs are visible; writes benchmarks/results/gpu_check.json with the device description.
# Sized for at most 8 minutes on one H200 (not yet run on a GPU). Options go to gpu_check.py: --dry-run (tiny,
# CPU), --out, --skip.
#   GPU_CHECK_NO_INSTALL=1   use the existing .venv as it is (no pip)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
if [ -z "${GPU_CHECK_NO_INSTALL:-}" ]; then
  make setup VENV="$venv"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
exec "$venv/bin/python" scripts/gpu_check.py "$@"
