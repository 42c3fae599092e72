"""The masking-ablation grid of notebook 08, run: training budgets, the data a grid shares, one run per
(variant, seed) — pretrain with one masking choice changed, then score the encoder three ways — and the resumable
grid that several processes can share. What the variants are and how the results are summarised is the lesson,
:mod:`mlm_course.ablations`.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course import corpus, finetune, models, objective_bug, tokenization
from mlm_course.ablations import FAMILIES, PAPER_TABLE8, Variant, feature_probe, summarise, variants
from mlm_course.lab import label_grid
from mlm_course.lab.finetune_run import fit
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.label_efficiency import collapse
from mlm_course.precision import machine
from mlm_course.pretraining import frozen_eval_batches, pack_blocks, unigram_baseline


@dataclass(frozen=True)
class Budget:
    """How much each run of the grid trains and how it is measured (``size``: the model size, as ``--size``)."""

    name: str
    size: str = "tiny"
    steps: int = 600
    batch_size: int = 32
    seq_len: int = 64
    # 800-step runs at lr 2e-3 or 3e-3 sometimes collapsed to unigram guessing (held-out loss 6.74, fine-tuning at
    # chance) on this corpus; at 1e-3 with 20 % warm-up none did in our tests
    lr: float = 1e-3
    warmup_ratio: float = 0.2
    max_chars: int | None = None  # pretraining text (None: the whole training split)
    small_data_chars: int = 150_000  # the slice the ``static`` family trains on for many epochs
    static_copies: int = 1
    eval_sequences: int | None = None  # held-out sequences with frozen masks (None: all)
    finetune_epochs: int = 1
    finetune_min_steps: int = 600  # notebook 07's recipe: at least this many steps, whatever the epochs
    finetune_lr: float = 5e-4
    finetune_max_length: int = 64
    train_examples: int | None = 4000
    eval_examples: int | None = None
    seeds: tuple[int, ...] = (0, 1, 2)

    @property
    def tokens_per_run(self) -> int:
        return self.steps * self.batch_size * self.seq_len


TRAINING_BUDGETS: dict[str, Budget] = {
    # seconds per run on a laptop; what CI and the notebook's live cell use
    "quick": Budget("quick", steps=10, batch_size=8, max_chars=200_000, small_data_chars=20_000,
                    eval_sequences=32, train_examples=128, eval_examples=128, finetune_min_steps=10, seeds=(0,)),
    # 4-10 minutes per run on one thread, two runs sharing a 2-core CPU (220-587 s; 33 runs: 2.9 h of run time, 3 Dec):
    # still on the early plateau (notebook 06)
    "cpu": Budget("cpu", steps=800),
    # past the plateau: about 25 CPU-minutes per run (hours for the grid), a few minutes per run on a GPU
    "long": Budget("long", steps=8000, seq_len=128, lr=3e-3, warmup_ratio=0.1, finetune_epochs=2, train_examples=None),
}


def stored_run(document: dict, budget: Budget, key: str, seed: int) -> dict | None:
    """The stored row of run (``key``, ``seed``) when ``document`` was made with ``budget`` (seeds aside), else None."""
    same = {k: v for k, v in asdict(budget).items() if k not in ("name", "seeds")}
    stored = {k: document["budget"].get(k) for k in same}
    if json.loads(json.dumps(same)) != stored:  # tuples vs lists: compare as JSON
        return None
    return next((row for row in document["runs"] if row["key"] == key and row["seed"] == seed), None)


@dataclass
class GridData:
    """Everything the runs of one budget share: tokenizer, packed blocks, frozen evaluation masks, sentiment."""

    tokenizer: PreTrainedTokenizerBase
    train_blocks: torch.Tensor
    small_blocks: torch.Tensor
    eval_blocks: torch.Tensor
    sentiment: dict[str, finetune.Encoded] = field(default_factory=dict)


def load_data(budget: Budget) -> GridData:
    """Pack the corpus and encode the sentiment splits once for a whole grid."""
    tokenizer = tokenization.course_tokenizer()
    train = pack_blocks([corpus.pretraining_text("train", max_chars=budget.max_chars)], tokenizer, budget.seq_len)
    small = pack_blocks([corpus.pretraining_text("train", max_chars=budget.small_data_chars)], tokenizer,
                        budget.seq_len)
    heldout = pack_blocks([corpus.pretraining_text("heldout")], tokenizer, budget.seq_len)[: budget.eval_sequences]
    if len(small) < budget.batch_size:
        raise ValueError(f"small_data_chars={budget.small_data_chars:,} gives {len(small)} sequences, fewer than a "
                         f"batch of {budget.batch_size}: raise small_data_chars")
    sentiment = {
        split: finetune.sentiment_data(tokenizer, split, max_length=budget.finetune_max_length,
                                       examples=budget.train_examples if split == "train" else budget.eval_examples)
        for split in ("train", "dev", "test")
    }
    return GridData(tokenizer, train, small, heldout, sentiment)


# ---- one run ---------------------------------------------------------------------------------------------------------


def fine_tune_accuracy(model: torch.nn.Module, data: GridData, budget: Budget, seed: int, work_dir: Path) -> dict:
    """Fine-tune the pretrained encoder (new head) on sentiment with notebook 07's recipe
    (:func:`mlm_course.lab.label_grid.recipe`: at least ``finetune_min_steps`` steps, ten dev evaluations, the best
    one kept); test accuracy, the share of test sentences predicted positive, and whether the run collapsed to one
    class (≥ 95 % of its test predictions, notebook 07's rule)."""
    model.save_pretrained(work_dir)
    data.tokenizer.save_pretrained(work_dir)
    classifier, _ = finetune.load_classifier(work_dir, seed=seed, dropout=0.1)
    config = label_grid.recipe(len(data.sentiment["train"]), budget.finetune_lr, seed, epochs=budget.finetune_epochs,
                               min_steps=budget.finetune_min_steps)
    pad = data.tokenizer.pad_token_id
    fitted = fit(classifier, data.sentiment["train"], data.sentiment["dev"], config, pad_token_id=pad,
                 progress=False, verbose=False)
    test = finetune.evaluate(fitted.model, data.sentiment["test"], pad_token_id=pad)
    share, collapsed = collapse(test.predictions)
    return {"dev_accuracy": fitted.best_dev["accuracy"] if fitted.best_dev else None,
            "test_accuracy": test.metrics["accuracy"], "steps": fitted.steps, "best_step": fitted.best_step,
            "predicted_positive_share": round(share, 4), "collapsed": collapsed}


def heldout_by_action(model: torch.nn.Module, data: GridData) -> dict[str, dict[str, float]]:
    """Held-out loss and top-1 on the frozen 15 % 80/10/10 masks, overall (``"all"``, equal to the run's held-out
    figures) and split by what the evaluation did at the position: ``"[MASK]"``, ``"random token"``, ``"unchanged"``
    (:func:`mlm_course.objective_bug.evaluate_by_action`)."""
    batches = frozen_eval_batches(data.eval_blocks, data.tokenizer)  # the masks pretrain() scores on
    return objective_bug.evaluate_by_action(model, batches, data.tokenizer.mask_token_id)


def heldout_baselines(data: GridData) -> dict[str, dict[str, float]]:
    """Reference levels on the grid's held-out masks: uniform guessing over the vocabulary (``"chance"``) and
    the training-token frequencies (``"unigram"``, :func:`mlm_course.pretraining.unigram_baseline`)."""
    batches = frozen_eval_batches(data.eval_blocks, data.tokenizer)
    vocab = len(data.tokenizer)
    unigram = unigram_baseline(data.train_blocks, batches, vocab, data.tokenizer.all_special_ids)
    return {"chance": {"loss": math.log(vocab), "top1": 1 / vocab, "tokens": unigram["tokens"]}, "unigram": unigram}


def variant_config(variant: Variant, seed: int, budget: Budget) -> PretrainConfig:
    """The pretraining settings of one run of the grid: the budget's recipe with the variant's masking, in fp32
    (the stored grid is fp32; "auto" would pick bf16 on CPUs where it measures faster)."""
    return PretrainConfig(size=budget.size, seq_len=budget.seq_len, dropout=0.0, mask_rate=variant.mask_rate,
                          mask_mix=variant.mask_mix, static_copies=variant.static_copies, steps=budget.steps,
                          batch_size=budget.batch_size, lr=budget.lr, warmup_ratio=budget.warmup_ratio, minutes=None,
                          eval_every=budget.steps, save_every=budget.steps, seed=seed, precision="fp32")


def pretrain_variant(variant: Variant, seed: int, budget: Budget, data: GridData) -> tuple[torch.nn.Module, dict]:
    """Pretrain one variant with one seed and score it on the held-out masks (overall and by action)."""
    start = time.perf_counter()
    config = variant_config(variant, seed, budget)
    model = models.build_model(budget.size, data.tokenizer, seed=seed, max_positions=budget.seq_len, dropout=0.0)
    blocks = data.small_blocks if variant.small_data else data.train_blocks
    result = pretrain(model, data.tokenizer, blocks, data.eval_blocks, config)
    heldout = [m for m in result.history if m["split"] == "eval"][-1]
    model = model.cpu().eval()
    return model, {
        "key": variant.key, "seed": seed,
        "epochs": round(budget.steps * budget.batch_size / len(blocks), 2),
        "heldout": {k: heldout[k] for k in ("loss", "top1", "top5", "tokens")},
        "heldout_by_action": heldout_by_action(model, data),
        "seconds": {"pretrain": round(time.perf_counter() - start, 1)},
    }


def run_variant(variant: Variant, seed: int, budget: Budget, data: GridData, work_dir: Path,
                downstream: bool = True) -> dict:
    """Pretrain one variant with one seed, then score it three ways (``downstream=False``: held-out loss only).
    Returns the run's row."""
    start = time.perf_counter()
    model, row = pretrain_variant(variant, seed, budget, data)
    if downstream:
        row["probe"] = feature_probe(model, data.sentiment, data.tokenizer.pad_token_id)
        row["finetune"] = fine_tune_accuracy(model, data, budget, seed, work_dir)
    row["seconds"]["total"] = round(time.perf_counter() - start, 1)
    return row


# ---- the grid ------------------------------------------------------------------------------------------------------


def _claim(path: Path) -> bool:
    """Take run ``path`` for this process (a file holding our pid); False when a live process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            with open(path, "x") as claim:
                claim.write(str(os.getpid()))
            return True
        except FileExistsError:
            try:
                os.kill(int(path.read_text() or 0), 0)  # signal 0: is the holder alive?
                return False
            except (ProcessLookupError, ValueError, FileNotFoundError):
                path.unlink(missing_ok=True)  # left by a killed run: take it over
            except PermissionError:
                return False
    return False


def run_grid(budget: Budget, out_dir: str | Path, *, families: Sequence[str] = FAMILIES,
             log: Callable[[str], None] = print, downstream: bool = True) -> list[dict]:
    """Every (variant, seed) of the grid; each finished run is stored in ``out_dir`` and skipped on a rerun.
    ``downstream=False`` pretrains and scores the held-out masks only (no fine-tuning, no probe), stored apart.

    Several processes can share a grid: each claims a run before training it and skips runs claimed by another
    live process (the returned rows then hold only the finished runs; rerun once all are done to collect them).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    grid = variants(families, static_copies=budget.static_copies)
    keys = list(dict.fromkeys(v.key for v in grid))
    by_key = {v.key: v for v in grid}
    data = None
    rows = []
    for seed in budget.seeds:  # seeds outermost: a grid stopped early still has whole seeds
        for key in keys:
            done = out / key / f"seed-{seed}{'' if downstream else '-heldout'}.json"
            if done.exists():
                rows.append(json.loads(done.read_text()))
                continue
            if not _claim(done.with_suffix(".claim")):
                log(f"{key} seed {seed}: being run by another process, skipped")
                continue
            data = data or load_data(budget)
            try:
                row = run_variant(by_key[key], seed, budget, data, out / key / f"seed-{seed}-model",
                                  downstream=downstream)
                write_json_atomic(done, row)
            finally:
                done.with_suffix(".claim").unlink(missing_ok=True)
            scores = (f", fine-tune {row['finetune']['test_accuracy']:.3f}, probe {row['probe']['test_accuracy']:.3f}"
                      if downstream else "")
            log(f"{key} seed {seed}: held-out loss {row['heldout']['loss']:.3f}{scores} "
                f"({row['seconds']['total']:.0f} s)")
            rows.append(row)
    return rows


def results_document(rows: Sequence[dict], budget: Budget, *, command: str, seconds: float,
                     families: Sequence[str] = FAMILIES) -> dict:
    """What the grid script stores: budget, hardware, time (``seconds``: the runs' wall times added), every run and
    the per-variant summary."""
    return {
        "budget": asdict(budget) | {"tokens_per_run": budget.tokens_per_run},
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "runs_wall_seconds": round(seconds, 1),  # the runs one after another, on this machine
        "paper_table8": list(PAPER_TABLE8),
        "summary": summarise(rows, budget.static_copies, families),
        "runs": list(rows),
    }


