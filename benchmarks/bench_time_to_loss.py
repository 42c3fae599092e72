"""Time to loss, not only tokens per second (Cramming's question at course scale): CPU-seconds until the held-out
masked-LM loss first reaches a target, for the course's recipe and for transformers' as people use it.

    python benchmarks/bench_time_to_loss.py                  # every run (hours), then the report
    python benchmarks/bench_time_to_loss.py --runs transformers_tuned course course_full_logits course_fp32 \\
        transformers_tuned_lr1e-3                            # one process ...
    python benchmarks/bench_time_to_loss.py --runs transformers_defaults transformers_in_course_loop \\
        course_dropout course_short_seq course_no_packing throughput   # ... and another beside it
    python benchmarks/bench_time_to_loss.py --report --figure curves.png   # only the report (and the figure)
    python benchmarks/bench_time_to_loss.py --quick --work /tmp/ttl   # seconds per run, tiny text (CI smoke)

Every run trains the same model size on the same text on this CPU, one torch thread each (two runs fit the
2 cores side by side), from step 0 until its budget of 30 CPU-minutes is spent, its schedule ends, or (ablations,
once the targets are known) it has reached every target:

* ``course`` (a) — the course's loop (``time_to_loss_runs.Stepper``: the lessons' training step with
  :func:`~mlm_course.lab.pretrain_run.seeded_batches` and :func:`~mlm_course.objective.masked_lm_loss`, what
  :func:`~mlm_course.lab.pretrain_run.pretrain` assembles; the stored results were measured with the course's runner
  of that time, which ran the same step) and the first stage of the shipped checkpoint
  (``mlm_course/data/course-bert``): ``tiny`` (hidden 128, 2 layers, 2 heads, FFN 512), the course WordPiece
  (8,192), packed 128-token blocks, batch 32, AdamW lr 3e-3, betas (0.9, 0.98), eps 1e-6, weight decay 0.01,
  700 warm-up steps then linear decay over 14,000 steps, clipping at 1.0, no dropout, logits only at the masked
  positions, no short sequences (stage 1 had none; ``course_short_seq`` adds BERT's 10 %), precision ``auto``:
  decided once per work folder by :func:`mlm_course.precision.auto_dtype` on one thread (``precision.json``),
  so every run of the comparison computes in the same format.
* ``transformers_defaults`` (b) — ``Trainer`` at its defaults (lr 5e-5, batch 8, AdamW betas (0.9, 0.999),
  eps 1e-8, no weight decay, no warm-up, linear decay, clipping 1.0, fp32), ``BertForMaskedLM`` (dropout 0.1),
  ``DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)`` on the same blocks (what the Hugging Face
  course's ``group_texts`` makes). One default is changed: the length of its schedule. Its 3 epochs are 4,245
  steps, which end (and decay the learning rate to 0) well inside the budget; ``max_steps`` = 56,000 spans the
  same 448,000 sequences as (a)'s 14,000 × 32, so, like (a), it is still near its peak rate at 30 minutes,
  which at 5e-5 can only help it. Like ours, no checkpoints (``save_strategy="no"``) and no progress bar, in
  (b) and (c) alike.
* ``transformers_tuned`` (c) — the same ``Trainer``, model and collator, with the course's lr 3e-3, betas
  (0.9, 0.98), eps 1e-6, weight decay 0.01, 700 warm-up steps, linear decay over 14,000 steps, batch 32, seq 128,
  clipping 1.0, and (a)'s precision (``bf16=True, use_cpu=True`` where auto picked bf16: measured on this CPU,
  ``Trainer`` takes 0.89–0.91 CPU-s a step in bf16 against 1.01–1.09 in fp32, so a careful user would take it):
  only the model, collator, loss (the vocabulary projection at every position), dropout 0.1 and the loop differ.
  ``transformers_tuned_lr1e-3`` is the same at lr 1e-3, the other rate a careful user would try; the targets
  come from (c) at 3e-3 (the goal compares the same schedule) unless it diverges.
* Ablations, one course choice undone at a time from (a): ``course_full_logits`` (the projection at every
  position), ``course_dropout`` (0.1), ``course_no_packing`` (one paragraph per sequence, a longer one continuing
  in the next, padded to 128: 19,379 rows, 58 % of their positions real tokens), ``course_short_seq`` (10 % cut
  short), ``course_fp32`` (fp32 instead of what auto picked; void where auto picked fp32), and
  ``transformers_in_course_loop``: (c)'s model, collator and loss (``m(**b).loss``) in the course's runner, to be
  read against (c) in ``Trainer`` (the loop itself).
* ``throughput`` — short round-robin timings in one process: CPU-seconds per step of (a), of (a) in fp32, of our
  model doing transformers' work (dropout 0.1, full logits) and of ``BertForMaskedLM`` in the course's runner,
  each at (a)'s precision and in fp32; and this CPU's matmul rate in fp32 and bf16 on one thread.

The clock is the training process's CPU time (``time.process_time()``) with evaluation time subtracted, so a
second run or a neighbour's test on the other core does not slow it (contention is not fully removed: caches are
shared; each evaluation records the load average). The untrained model is scored at 0 s, then every 10 training
CPU-seconds for the first minute and every 30 after, and when a run stops: all recipes on the course's held-out
set with frozen 15 % 80/10/10 masks (:func:`~mlm_course.pretraining.frozen_eval_batches`), by
:func:`~mlm_course.pretraining.masked_predictions` (transformers' model through :class:`MaskedLMAdapter`), in fp32.

Targets (``time_to_loss_report.py``) are loss levels that (c) reaches within its budget: the three multiples
of 0.5 nats just above its best and its best rounded up to 0.05; plus (b)'s best, rounded up to 0.05, when (b)
improved on its first evaluation. The time to a target is the first evaluation at or below it, and the crossing
interpolated linearly between that evaluation and the one before (the ratios use the interpolated times).
The runs themselves are in ``time_to_loss_runs.py``; the figure is :func:`mlm_course.plots.time_to_loss_curves`.

Resumable: each run writes ``<work>/<run>.json`` when it ends (``<run>.partial.json`` while it runs, for a
look); a finished run is never redone, so a killed benchmark continues where it stopped and two processes with
different ``--runs`` share one work folder. The report (``benchmarks/results/time_to_loss.json``: the machine,
the commands, every curve, targets, times, ratios, goals) is rewritten from the finished runs at the end of each
invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from mlm_course import precision
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.pretraining import copying_baseline, evaluate_masked_lm, unigram_baseline

sys.path.insert(0, str(Path(__file__).resolve().parent))
import time_to_loss_report as report  # noqa: E402
from time_to_loss_runs import (  # noqa: E402
    FULL,
    QUICK,
    Data,
    Recorder,
    Sizes,
    load_data,
    matmul_rates,
    run_course,
    run_throughput,
    run_trainer,
    run_transformers_in_course_loop,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "time_to_loss.json"
WORK = ROOT / "runs" / "time_to_loss"
RUNS = {
    "course": "(a) the course's recipe",
    "transformers_defaults": "(b) Trainer + BertForMaskedLM at transformers' defaults",
    "transformers_tuned": "(c) Trainer + BertForMaskedLM at the course's lr 3e-3, warm-up, schedule, batch",
    "transformers_tuned_lr1e-3": "(c) at lr 1e-3",
    "course_full_logits": "(a) with the vocabulary projection at every position",
    "course_dropout": "(a) with dropout 0.1",
    "course_no_packing": "(a) with one paragraph per sequence, padded to 128",
    "course_short_seq": "(a) with 10 % of the sequences cut short",
    "course_fp32": "(a) in fp32",
    "transformers_in_course_loop": "(c)'s model, collator and loss in the course's runner",
    "throughput": "steps per CPU-second, round robin, and the matmul rate",
}
ABLATIONS = ("course_full_logits", "course_dropout", "course_no_packing", "course_short_seq", "course_fp32",
             "transformers_in_course_loop")


# ---- one run, and the driver -------------------------------------------------------------------------------------


def precision_choice(work: Path) -> dict:
    """What ``precision="auto"`` computes in on this CPU on one thread, decided once per work folder."""
    path = work / "precision.json"
    if not path.exists():
        dtype = precision.auto_dtype(torch.device("cpu"))
        choice = {"auto_picks": precision.precision_name(dtype),
                  "cpu_bf16_speedup_probe": round(precision.cpu_bf16_speedup(), 3),
                  "bf16_instructions": sorted(precision.cpu_flags() & set(precision.CPU_BF16_FLAGS)),
                  "threshold": precision.CPU_BF16_MIN_SPEEDUP}
        try:
            with open(path, "x") as handle:  # the first process decides; a second one reads its decision
                json.dump(choice, handle, indent=2)
        except FileExistsError:
            pass
    return json.loads(path.read_text())


def run_one(name: str, work: Path, sizes: Sizes, command: str) -> dict:
    """Run ``name`` and write ``<work>/<name>.json``."""
    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    chosen = precision_choice(work)["auto_picks"]
    data = load_data(sizes)
    targets = report.stopping_targets(work) if name in ABLATIONS else None  # (a), (b), (c): the whole budget
    matmul = matmul_rates(sizes.matmul_size)

    def recorder_for(tokens_per_step: int) -> Recorder:
        return Recorder(lambda m: evaluate_masked_lm(m, data.eval_batches), sizes, tokens_per_step=tokens_per_step,
                        targets=targets, partial=work / f"{name}.partial.json")

    if name == "course_fp32" and chosen == "fp32":
        outcome = {"void": "auto picks fp32 on this CPU: (a) already computes in fp32"}
    elif name == "throughput":
        outcome = run_throughput(data, sizes, chosen)
    elif name.startswith("course"):
        outcome = run_course(data, sizes, chosen, name, recorder_for)
    elif name == "transformers_in_course_loop":
        outcome = run_transformers_in_course_loop(data, chosen, recorder_for)
    else:
        outcome = run_trainer(data, name, chosen, recorder_for)
    record = {"name": name, "recipe": RUNS[name], **outcome, "targets_known_at_start": targets,
              "matmul_at_start": matmul, "torch_threads": torch.get_num_threads(), "started": started,
              "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command}
    write_json_atomic(work / f"{name}.json", record)
    (work / f"{name}.partial.json").unlink(missing_ok=True)
    return record


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), None)
    except OSError:
        return None


def shared_facts(data: Data, work: Path) -> dict:
    """What every run shares: data sizes, baselines on the frozen held-out masks, the precision choice, machine."""
    tok = data.tokenizer
    vocab, specials = len(tok), tok.all_special_ids
    flags = precision.cpu_flags()
    return {"train_blocks": len(data.train_blocks), "heldout_blocks": len(data.heldout_blocks),
            "heldout_masked_tokens": sum(int((b["labels"] != -100).sum()) for b in data.eval_batches),
            "unigram_baseline": unigram_baseline(data.train_blocks, data.eval_batches, vocab, specials),
            "copying_baseline": copying_baseline(data.train_blocks, data.eval_batches, vocab, specials,
                                                 tok.mask_token_id),
            "precision_choice": precision_choice(work),
            "machine": {**precision.machine(torch.device("cpu")), "cpu_model": cpu_model(),
                        "avx512": sorted(f for f in flags if f.startswith(("avx512", "amx"))),
                        "load_average_at_report": os.getloadavg(), "date": time.strftime("%Y-%m-%d")}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS), help="runs to do, in order")
    parser.add_argument("--report", action="store_true", help="only write the report from the finished runs")
    parser.add_argument("--quick", action="store_true", help="seconds per run on a tiny text (CI smoke)")
    parser.add_argument("--work", type=Path, default=WORK, help="one JSON file per run (resumable)")
    parser.add_argument("--out", type=Path, default=None, help=f"the report (default {RESULTS.relative_to(ROOT)}; "
                                                                "with --quick, <work>/time_to_loss.json)")
    parser.add_argument("--figure", type=Path, default=None, help="also save the figure of the curves (PNG)")
    parser.add_argument("--one", choices=list(RUNS), help=argparse.SUPPRESS)  # a run in its own process
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    args.work.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/bench_time_to_loss.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.one:
        run_one(args.one, args.work, sizes, command)
        return
    for name in [] if args.report else args.runs:
        if (args.work / f"{name}.json").exists():
            print(f"{name}: finished before, kept", flush=True)
            continue
        print(f"{name}: {RUNS[name]} ...", flush=True)
        if args.quick:  # in this process: the smoke run cannot afford an interpreter per run
            run_one(name, args.work, sizes, command)
        else:  # each run in a fresh process: its own CPU clock, memory and transformers/accelerate state
            subprocess.run([sys.executable, __file__, "--one", name, "--work", str(args.work)], check=True)
    write_report(args, sizes, command)


def write_report(args, sizes: Sizes, command: str) -> None:
    torch.set_num_threads(1)
    out = args.out or (args.work / "time_to_loss.json" if args.quick else RESULTS)
    document = report.build(args.work, shared_facts(load_data(sizes), args.work), sizes.budget_seconds,
                            {"this invocation": command, "runs": {n: r for n, r in RUNS.items()}})
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, document)
    print(report.summary(document), flush=True)
    if args.figure is not None:
        from mlm_course import plots

        plots.time_to_loss_curves(document).savefig(args.figure, dpi=100)


if __name__ == "__main__":
    main()
