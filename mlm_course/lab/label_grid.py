"""The label-efficiency grids of notebook 07, run: the fine-tuning recipe for a number of labels, one run per
(task, model, labels, seed), the linear baselines, and the resumable grid whose rows
:mod:`mlm_course.label_efficiency` summarises.

The recipe is the same for every number of labels, so small budgets do not starve: balanced subsets (pairs of real
and corrupted sentences for word order, half of each class for sentiment), at least :data:`MIN_STEPS` optimiser
steps, 10 % warm-up, ten dev evaluations per run, the best dev accuracy kept. The dev set that picks the best
evaluation grows with the budget — as many dev labels as training labels, at most :data:`DEV_EXAMPLES` — so a run
with 50 labels selects with 50 more, not with eight times its training set. Each row keeps its test predictions
(one character per test sentence), so two models can be compared sentence by sentence.
"""

from __future__ import annotations

import functools
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from mlm_course import corpus, finetune, models, ngram, word_order
from mlm_course.bert import BertMLM
from mlm_course.lab.finetune_run import FinetuneConfig, fit
from mlm_course.lab.run_files import write_json_atomic
from mlm_course.label_efficiency import (
    BOW_NGRAMS,
    LABEL_COUNTS,
    LINEAR_MODELS,
    PLL_PROBE,
    TASKS,
    balanced_subset,
    collapse,
    task_splits,
)

#: key -> (name for finetune.load_classifier, learning rate, minimum optimiser steps, epochs over all labels)
MODELS = {"random": ("random:course", 5e-4, 600, 2), "course": ("course", 5e-4, 600, 2),
          "minilm": ("minilm", 1e-4, 300, 1)}
MIN_STEPS = 600
DEV_EXAMPLES = 400  # the most dev examples used for model selection (the whole word-order dev split)
PRECISION = "fp32"  # the same numbers on every CPU (auto would pick bf16 where the CPU has it)


def recipe(n_train: int, lr: float, seed: int, *, epochs: int = 2, min_steps: int = MIN_STEPS,
           steps: int | None = None) -> FinetuneConfig:
    """The fine-tuning settings for ``n_train`` examples: batch 16 up to 300 examples (else 32), ≥ ``min_steps``."""
    batch = 16 if n_train <= 300 else 32
    per_epoch = math.ceil(n_train / batch)
    epochs = max(epochs, math.ceil(min_steps / per_epoch))
    total = per_epoch * epochs if steps is None else min(per_epoch * epochs, steps)
    return FinetuneConfig(epochs=epochs, steps=steps, batch_size=batch, lr=lr, warmup_ratio=0.1,
                           eval_every=max(1, total // 10), patience=None, seed=seed, log_every=10 ** 6,
                           precision=PRECISION)


def old_recipe(n_train: int, lr: float, seed: int, *, epochs: int = 2,
               steps: int | None = None) -> FinetuneConfig:
    """The settings of the first model comparison, kept to count its collapses: batch 32, dev twice an epoch."""
    per_epoch = math.ceil(n_train / 32)
    return FinetuneConfig(epochs=epochs, steps=steps, batch_size=32, lr=lr, warmup_ratio=0.1,
                           eval_every=max(1, per_epoch // 2), patience=3, seed=seed, log_every=10 ** 6,
                           precision=PRECISION)


def dev_examples(budget: int | None) -> int:
    """Dev labels that select the best evaluation of a run with ``budget`` training labels (None: all)."""
    return DEV_EXAMPLES if budget is None else min(budget, DEV_EXAMPLES)


def _row(task: str, model: str, budget: int | None, seed: int, predictions: list[int], labels: list[int],
         dev_accuracy: float, extra: dict) -> dict:
    share, collapsed = collapse(predictions)
    accuracy = sum(p == y for p, y in zip(predictions, labels, strict=True)) / len(labels)
    return {"task": task, "model": model, "budget": budget, "seed": seed, "test_accuracy": round(accuracy, 4),
            "dev_accuracy": round(dev_accuracy, 4), "predicted_positive_share": round(share, 4),
            "collapsed": collapsed, "test_predictions": finetune.prediction_string(predictions), **extra}


def _examples(task: str, budget: int | None, seed: int, balanced: bool, quick: bool):
    """(train, dev, test) as (texts, labels): ``budget`` training labels (balanced or a plain random draw)."""
    splits = task_splits(task)
    labels = splits["train"][1]
    keep = (balanced_subset(task, labels, budget, seed) if balanced
            else finetune.subset(len(labels), budget, seed))
    dev_keep = balanced_subset(task, splits["dev"][1], dev_examples(budget), 0)
    pick = lambda split, idx: ([splits[split][0][i] for i in idx], [splits[split][1][i] for i in idx])  # noqa: E731
    test = pick("test", range(200 if quick else len(splits["test"][1])))
    return pick("train", keep), pick("dev", dev_keep), test


def run_task(task: str, model: str, budget: int | None, seed: int, *, source: str | None = None,
             recipe_name: str = "balanced", quick: bool = False) -> dict:
    """Fine-tune ``model`` (a key of MODELS, ``bow``, or any key with ``source``) on ``budget`` labels of ``task``.

    ``recipe_name``: "balanced" (:func:`recipe`, balanced subsets) or "before" (:func:`old_recipe`, random subsets).
    """
    if recipe_name not in ("balanced", "before"):
        raise ValueError(f"recipe_name={recipe_name!r}: use 'balanced' or 'before'")
    train, dev, test = _examples(task, budget, seed, recipe_name == "balanced", quick)
    start = time.perf_counter()
    if model in LINEAR_MODELS:
        out = _pll_probe(task, train, dev, test) if model == PLL_PROBE else _bow(train, dev, test, BOW_NGRAMS[model])
        return _row(task, model, budget, seed, out["test_predictions"], test[1], out["dev"]["accuracy"],
                    {"recipe": recipe_name, "n_train": len(train[1]), "n_dev": len(dev[1]), "C": out["C"],
                     "seconds": round(time.perf_counter() - start, 1)})
    name, lr, min_steps, epochs = MODELS.get(model, (source, 5e-4, MIN_STEPS, 2))
    if name is None:
        raise ValueError(f"model={model!r}: use one of {', '.join([*MODELS, *LINEAR_MODELS])}, or pass source=<folder>")
    net, tokenizer = finetune.load_classifier(name, seed=seed)
    encoded = [finetune.encode(tokenizer, *split) for split in (train, dev, test)]
    steps = 20 if quick else None
    config = (recipe(len(train[1]), lr, seed, epochs=epochs, min_steps=min_steps, steps=steps)
              if recipe_name == "balanced" else old_recipe(len(train[1]), lr, seed, epochs=epochs, steps=steps))
    fitted = fit(net, encoded[0], encoded[1], config, pad_token_id=tokenizer.pad_token_id, progress=False,
                    verbose=False)
    scored = finetune.evaluate(fitted.model, encoded[2], pad_token_id=tokenizer.pad_token_id)
    return _row(task, model, budget, seed, scored.predictions, test[1], fitted.best_dev["accuracy"],
                {"recipe": recipe_name, "n_train": len(train[1]), "n_dev": len(dev[1]), "steps": fitted.steps,
                 "best_step": fitted.best_step,
                 "lr": lr, "batch_size": config.batch_size, "seconds": round(time.perf_counter() - start, 1)})


def _bow(train, dev, test, ngram_range: tuple[int, int]) -> dict:
    """A bag of words (``bow``: single words, at chance on word order by construction) or of words and adjacent
    word pairs (``bow_pairs``: a swap changes which pairs occur), TF-IDF + logistic regression, C chosen on dev
    among the baseline's own choices (the same as notebook 07's comparison)."""
    splits = (SimpleNamespace(texts=texts, labels=labels) for texts, labels in (train, dev, test))
    return finetune.bag_of_words_baseline(*splits, ngram_range=ngram_range)


@functools.lru_cache(maxsize=1)
def _pll_table() -> dict[str, list[float]]:
    """The course checkpoint's PLL features of every word-order sentence (all splits; computed once per process)."""
    model, tokenizer = models.load_mlm("course")
    texts = sorted({text for name in word_order.SPLITS for text in word_order.split(name).texts})
    return dict(zip(texts, word_order.pll_features(model, tokenizer, texts), strict=True))


def _pll_probe(task, train, dev, test) -> dict:
    """Logistic regression on the course checkpoint's PLL features (standardised on train), C chosen on dev."""
    if task != "word_order":
        raise ValueError(f"{PLL_PROBE} is defined for word_order only, not {task!r}")
    table = _pll_table()
    x = [torch.tensor([table[text] for text in texts]) for texts, _ in (train, dev, test)]
    mean, std = x[0].mean(0), x[0].std(0).clamp_min(1e-6)
    x = [((features - mean) / std).numpy() for features in x]
    return finetune.logistic_regression_on_dev((x[0], train[1]), (x[1], dev[1]), (x[2], test[1]),
                                               cs=(0.01, 0.1, 1, 10, 100))


def run_key(row: dict) -> tuple:
    """What identifies a run: (task, model, budget, seed, recipe)."""
    return row["task"], row["model"], row["budget"], row["seed"], row.get("recipe", "balanced")


def read_results(path: str | Path) -> dict:
    """The results document at ``path`` ({} when there is none yet)."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {}


def run_grid(path: str | Path, *, tasks=TASKS, models=(*MODELS, *BOW_NGRAMS), budgets=LABEL_COUNTS, seeds=(0, 1, 2),
             sources: dict[str, str] | None = None, recipe_name: str = "balanced", quick: bool = False,
             command: str | None = None, log=print) -> list[dict]:
    """Run every (task, model, budget, seed) not yet in ``path`` and append its row (written atomically each time)."""
    path = Path(path)
    document = read_results(path)
    rows = document.setdefault("rows", [])
    if command:
        document.setdefault("commands", []).append(command)
    done = {run_key(r) for r in rows}
    for task in tasks:
        for model in models:
            for budget in budgets:
                for seed in seeds:
                    if (task, model, budget, seed, recipe_name) in done:
                        continue
                    row = run_task(task, model, budget, seed, source=(sources or {}).get(model),
                                  recipe_name=recipe_name, quick=quick)
                    rows.append(row)
                    write_json_atomic(path, document | {"quick": quick})
                    log(f"{recipe_name}: {task} {model} {budget} seed {seed}: test {row['test_accuracy']:.3f}"
                        f"{' COLLAPSED' if row['collapsed'] else ''} ({row['seconds']} s)")
    return rows


def merge_results(documents: list[dict], *, replace: bool = False) -> dict:
    """One results document from several (grids run in parallel): rows, commands and the zero-shot table.

    Raises ValueError when two documents hold the same (task, model, budget, seed, recipe) run, unless ``replace``:
    then a later document's run replaces an earlier one's (a grid re-run with a changed recipe).
    """
    merged: dict = {"rows": [], "commands": []}
    rows: dict[tuple, dict] = {}
    for document in documents:
        later = {run_key(row) for row in document.get("rows", [])}
        if replace:
            rows = {key: row for key, row in rows.items() if key not in later}
        for row in document.get("rows", []):
            key = run_key(row)
            if key in rows:
                raise ValueError(f"run {key} appears in two result files: keep one of them")
            rows[key] = row
    merged["rows"] = list(rows.values())
    for document in documents:
        merged["commands"] += document.get("commands", [])
        for key in ("zero_shot", "zero_shot_command"):
            if key in document:
                merged[key] = document[key]
        merged["quick"] = merged.get("quick", False) or document.get("quick", False)
    return merged


def describe_run(folder: str | Path) -> dict:
    """What a pretraining run folder says about itself: steps, seconds, held-out loss, and its training settings."""
    results = json.loads((Path(folder) / "results.json").read_text())
    keep = ("steps", "tokens_seen", "seconds", "heldout", "unigram_baseline", "settings", "machine")
    return {"folder": str(folder), **{key: results[key] for key in keep if key in results}}


def review_masked_lm_loss(name_or_folder: str | Path, seq_len: int = 128) -> dict[str, float]:
    """Masked-LM loss, top-1 and top-5 of a checkpoint on the sentiment **dev** sentences (text no run trained on),
    packed into ``seq_len`` blocks with the frozen evaluation masks: how well it models movie-review language."""
    from mlm_course import pretraining

    model, tokenizer = models.load_mlm(str(name_or_folder))
    blocks = pretraining.pack_blocks(corpus.sentiment("dev").texts, tokenizer, seq_len)
    batches = pretraining.frozen_eval_batches(blocks, tokenizer)
    return pretraining.evaluate_masked_lm(model, batches)


def zero_shot_models(seed: int = 0) -> dict:
    """(masked-LM, tokenizer) for the zero-shot comparison: the course checkpoint, the same architecture with
    random weights, and MiniLM (whose MLM head is newly initialised) when its package is installed."""
    course, tokenizer = models.load_mlm("course")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = {"course": (course, tokenizer), "random": (BertMLM(course.config).eval(), tokenizer)}
        if models.minilm_dir() is not None:
            out["minilm"] = models.load_mlm("minilm")  # its new MLM head drawn from the same seeded generator
    return out


def zero_shot_table(pairs: list[tuple[str, str]], masked_lms: dict[str, tuple],
                    ngram_models: dict[str, ngram.NgramModel]) -> dict:
    """Zero-shot word order on ``pairs``, per scorer: the ``masked_lms`` ({key: (model, tokenizer)}, e.g.
    :func:`zero_shot_models`; PLL) and the counted ``ngram_models`` (log-probability), each summarised by
    :func:`mlm_course.word_order.summarise_outcomes` (accuracy, Wilson interval, per-pair outcomes)."""
    table = {}
    for key, (model, tokenizer) in masked_lms.items():
        start = time.perf_counter()
        table[key] = word_order.zero_shot(model, tokenizer, pairs) | {"seconds": round(time.perf_counter() - start)}
    for key, counted in ngram_models.items():
        table[key] = word_order.summarise_outcomes(ngram.prefers_real(counted, pairs))
    return table
