"""Training-step speed on the CPU: mlm_course.bert.BertMLM vs transformers' BertForMaskedLM, same weights and batches.

    .venv/bin/python benchmarks/bench_bert_training.py           # tiny and small: writes benchmarks/results/bert_training.json
    .venv/bin/python benchmarks/bench_bert_training.py --quick   # smoke (tiny, 2 repeats); writes only with --out

One step is the course's one training step, :func:`mlm_course.steps.training_step`, with each candidate's loss:
forward, ``F.cross_entropy`` over the masked positions (15 %), backward, AdamW step (``steps.parameter_groups``),
the schedule's step (``steps.linear_schedule``), gradients set to None; no clipping, so the step is those lines and
nothing else. Candidates, each with its own copy of the same initial weights and its own optimizer, on the same batch
(32 × 128, no padding, as packed pretraining blocks), dropout 0.1 (the default):

* ``ours_sparse`` — ``BertMLM(ids, mask, positions=...)``: the MLM head only at the masked positions;
* ``transformers_sparse`` — the same with transformers' own parts: ``model.bert(...)``, then ``model.cls`` on the
  hidden states at the masked positions (its default SDPA attention);
* ``transformers_dense`` — ``BertForMaskedLM(..., labels=...).loss``: the head at every position, as most code does;
* ``ours_dense`` — ours with the head at every position (for information).

fp32, one torch thread. Times are medians of the repeats, the candidates timed in turn each round so a busy machine
slows all alike, on two clocks: wall time and this process's CPU time (with one thread, what a step costs without
the waits a shared machine adds; the ratios use it). ``ratio_*`` > 1 means ours is slower. Before timing, the first
step's loss of each pair is compared in eval mode (no dropout): ``loss_difference_*``.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from pathlib import Path

import timing  # benchmarks/timing.py (run as a script, this folder is on sys.path)
import torch
import torch.nn.functional as F
import transformers
from transformers import BertConfig, BertForMaskedLM

from mlm_course import models, precision, steps
from mlm_course.bert import BertMLM

RESULTS = Path(__file__).resolve().parent / "results" / "bert_training.json"
VOCAB = 8192
SEQ_LEN = 128
BATCH = 32
MASK_RATE = 0.15
DROPOUT = 0.1
LR = 1e-4
WEIGHT_DECAY = 0.01


def batch() -> dict[str, torch.Tensor]:
    """input_ids, attention_mask, labels: random ids, no padding, 15 % of the positions to predict."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (BATCH, SEQ_LEN), generator=g)
    labels = torch.where(torch.rand(ids.shape, generator=g) < MASK_RATE, ids, -100)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def _masked(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(the flat positions to predict, their labels)."""
    flat = batch["labels"].flatten()
    positions = (flat != -100).nonzero().squeeze(1)
    return positions, flat[positions]


def ours_sparse(model: BertMLM, batch: dict) -> torch.Tensor:
    positions, targets = _masked(batch)
    return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"], positions=positions), targets)


def transformers_sparse(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
    positions, targets = _masked(batch)
    hidden = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    return F.cross_entropy(model.cls(hidden.flatten(0, 1)[positions]), targets)


def transformers_dense(model: BertForMaskedLM, batch: dict) -> torch.Tensor:
    return model(**batch).loss


def ours_dense(model: BertMLM, batch: dict) -> torch.Tensor:
    return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]).flatten(0, 1), batch["labels"].flatten())


LOSSES = {"ours_sparse": ours_sparse, "transformers_sparse": transformers_sparse,
          "transformers_dense": transformers_dense, "ours_dense": ours_dense}


def candidate_models(reference: BertForMaskedLM) -> dict[str, torch.nn.Module]:
    """Each candidate's own copy of ``reference``'s weights, so no step sees weights another candidate moved."""
    return {name: BertMLM.from_transformers(reference) if name.startswith("ours") else copy.deepcopy(reference)
            for name in LOSSES}


def timed_step(model: torch.nn.Module, loss_fn, batch: dict):
    """One call of :func:`mlm_course.steps.training_step` on ``batch``, with the model's own AdamW and schedule."""
    optimizer = torch.optim.AdamW(steps.parameter_groups(model, WEIGHT_DECAY), lr=LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, steps.linear_schedule(1, 10_000))
    return lambda: steps.training_step(model, [batch], loss_fn, optimizer, scheduler, max_grad_norm=None)


def candidate_steps(size: str) -> tuple[dict, dict]:
    """({candidate: one training step}, {pair: |loss difference| at the first step, eval mode})."""
    config = BertConfig(**models.CONFIGS[size], vocab_size=VOCAB, max_position_embeddings=SEQ_LEN,
                        hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT)
    torch.manual_seed(0)
    by_name = candidate_models(BertForMaskedLM(config))
    data = batch()
    with torch.no_grad():
        for model in by_name.values():
            model.eval()  # no dropout: the first losses must be equal
        first = {name: loss_fn(by_name[name], data) for name, loss_fn in LOSSES.items()}
    difference = {"sparse": abs(float(first["ours_sparse"] - first["transformers_sparse"])),
                  "dense": abs(float(first["ours_dense"] - first["transformers_dense"]))}
    return {name: timed_step(by_name[name], loss_fn, data) for name, loss_fn in LOSSES.items()}, difference


def round_robin_medians(candidates: dict, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """(median wall seconds, median CPU seconds) per candidate: :func:`timing.round_robin_medians` on two clocks."""
    wall: dict[str, list[float]] = {name: [] for name in candidates}
    cpu: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in candidates.items():
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start_wall)
            cpu[name].append(time.process_time() - start_cpu)
    return ({name: statistics.median(v) for name, v in wall.items()},
            {name: statistics.median(v) for name, v in cpu.items()})


def bench_size(size: str, repeats: int) -> dict:
    candidates, difference = candidate_steps(size)
    wall, seconds = round_robin_medians(candidates, repeats)
    return {
        "config": {**models.CONFIGS[size], "vocab_size": VOCAB, "dropout": DROPOUT},
        "batch": [BATCH, SEQ_LEN], "mask_rate": MASK_RATE, "repeats": repeats,
        "cpu_seconds_per_step": seconds, "wall_seconds_per_step": wall,
        "tokens_per_cpu_second": {name: BATCH * SEQ_LEN / s for name, s in seconds.items()},
        "wall_ratio_ours_over_transformers_sparse": wall["ours_sparse"] / wall["transformers_sparse"],
        "ratio_ours_over_transformers_sparse": seconds["ours_sparse"] / seconds["transformers_sparse"],
        "ratio_ours_over_transformers_dense": seconds["ours_sparse"] / seconds["transformers_dense"],
        "ratio_ours_dense_over_transformers_dense": seconds["ours_dense"] / seconds["transformers_dense"],
        "loss_difference_sparse": difference["sparse"], "loss_difference_dense": difference["dense"],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny only, 2 repeats")
    parser.add_argument("--out", type=Path, default=None, help=f"where to write the JSON (full mode: {RESULTS})")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    plan = [("tiny", 2)] if args.quick else [("tiny", 9), ("small", 7)]
    results = {
        "task": "one MLM training step, mlm_course.steps.training_step (forward, cross-entropy at the masked 15 %, "
                "backward, AdamW, no clipping), fp32, dropout 0.1, same weights and batch for every candidate",
        "sizes": {size: bench_size(size, repeats) for size, repeats in plan},
        "machine": {**precision.machine(torch.device("cpu")), "load_average_1min": os.getloadavg()[0]},
        "transformers": transformers.__version__,
    }
    timing.save_results(results, args.out, RESULTS, smoke=args.quick)
    for size, r in results["sizes"].items():
        s = {name: f"{t * 1e3:.0f} ms" for name, t in r["cpu_seconds_per_step"].items()}
        print(f"{size:>6}: CPU time {s} → ours / transformers sparse = {r['ratio_ours_over_transformers_sparse']:.2f}, "
              f"ours / transformers dense = {r['ratio_ours_over_transformers_dense']:.2f}; |Δloss| sparse "
              f"{r['loss_difference_sparse']:.1e}, dense {r['loss_difference_dense']:.1e}; wall-clock ratio sparse "
              f"{r['wall_ratio_ours_over_transformers_sparse']:.2f}")
    return results


if __name__ == "__main__":
    main()
