#!/usr/bin/env bash
# The course's GPU check (make gpu-check runs it). On a GPU machine whose Python already has CUDA torch,
# transformers and accelerate (a rented image; no package index needed, the repository copied in as a folder):
#     bash scripts/gpu_check.sh --python python3          # or: PYTHON=python3 bash scripts/gpu_check.sh
# Installs nothing, ≤ 8 minutes on one H200: CUDA tests (tests/cuda), fine-tuning throughput against
# transformers.Trainer (eager, then compiled), 2 minutes of `small` pretraining, fine-tunes of the course checkpoint
# and MiniLM, two processes when two GPUs are visible. Writes benchmarks/results/gpu_check.json (--out FILE to
# change) after every step, so a step that fails or hangs keeps what the others measured.
# Other options (scripts/gpu_check.py --help): --device cuda:N, --skip/--only STEP,..., --work DIR (keep the steps'
# outputs and logs).
#     bash scripts/gpu_check.sh --dry-run --python "$(which python)" --out /tmp/gpu_check.json
# checks the check itself on any CPU: every step at tiny sizes, fp32, in a minute or two; it writes only with --out.
#     bash scripts/gpu_check.sh --install                  # where a package index is reachable: make setup first,
#                                                         # then the check with .venv/bin/python
# Python: --python PATH, else $PYTHON, else .venv/bin/python where it exists, else python3.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-}
install=
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --install) install=1 ;;
    --python) python=${2:?--python needs a path}; args+=(--python "$2"); shift ;;
    --python=*) python=${1#--python=}; args+=("$1") ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ -n "$install" ]; then
  if [ -n "$python" ]; then
    echo "gpu_check: --install makes .venv and runs the check with it; leave out --python (or PYTHON=)" >&2
    exit 2
  fi
  make setup
  python=.venv/bin/python
  args+=(--python "$python")
fi
# the check itself needs only the standard library: the Python of the steps runs it too (python3 by default)
exec "${python:-python3}" scripts/gpu_check.py ${args[@]+"${args[@]}"}
