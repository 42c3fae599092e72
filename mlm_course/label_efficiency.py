"""What pretraining buys: accuracy against the number of labelled examples, per model, on two tasks (notebook 07).

Tasks: ``word_order`` (real sentence or a copy with words reordered, :mod:`mlm_course.word_order`) and
``sentiment`` (the movie-review sentences). Models: ``random`` (the course architecture, random weights),
``course`` (the course checkpoint), ``minilm`` (a real pretrained encoder), a domain-adapted checkpoint given as a
folder, and ``bow`` (bag of words + logistic regression). Every run is one JSON row; a grid is resumable.

The recipe is the same for every budget, so small budgets do not starve: balanced subsets (pairs of real and
corrupted sentences for word order, half of each class for sentiment), at least :data:`MIN_STEPS` optimiser
steps, 10 % warm-up, ten dev evaluations per run, the best dev accuracy kept. A run whose test predictions are
≥ 95 % one class is flagged ``collapsed``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from statistics import mean, stdev
from types import SimpleNamespace

import torch

from . import corpus, finetune, models, word_order
from .training import write_json_atomic

TASKS = ("word_order", "sentiment")
BUDGETS = (50, 100, 300, 1000, None)  # None: every training label
#: key -> (name for finetune.load_classifier, learning rate, minimum optimiser steps, epochs over all labels)
MODELS = {"random": ("random:course", 5e-4, 600, 2), "course": ("course", 5e-4, 600, 2),
          "minilm": ("minilm", 1e-4, 300, 1)}
MIN_STEPS = 600
DEV_EXAMPLES = 400  # dev examples used for model selection (the whole word-order dev split)
COLLAPSE_SHARE = 0.95
PRECISION = "fp32"  # the same numbers on every CPU (auto would pick bf16 where the CPU has it)


def task_splits(task: str) -> dict[str, tuple[list[str], list[int]]]:
    """(texts, labels) of the train, dev and test splits of ``task``."""
    if task == "word_order":
        return {s: (d.texts, d.labels) for s in word_order.SPLITS for d in [word_order.split(s)]}
    if task == "sentiment":
        return {s: (d.texts, d.labels) for s in corpus.SENTIMENT_SPLITS for d in [corpus.sentiment(s)]}
    raise ValueError(f"task={task!r}: use one of {', '.join(TASKS)}")


def balanced_subset(task: str, labels: list[int], n: int | None, seed: int) -> list[int]:
    """``n`` training indices, half of each class: whole (real, corrupted) pairs for word order; None = all."""
    if n is None or n >= len(labels):
        return list(range(len(labels)))
    if n < 2 or n % 2:
        raise ValueError(f"budget {n}: use an even number of examples ≥ 2 (half of each class)")
    generator = torch.Generator().manual_seed(seed)
    if task == "word_order":  # examples 2k (real) and 2k + 1 (its corrupted copy) stay together
        pairs = torch.randperm(len(labels) // 2, generator=generator)[: n // 2].tolist()
        return sorted(i for p in pairs for i in (2 * p, 2 * p + 1))
    chosen = []
    for label in sorted(set(labels)):
        members = [i for i, y in enumerate(labels) if y == label]
        chosen += [members[j] for j in torch.randperm(len(members), generator=generator)[: n // 2].tolist()]
    return sorted(chosen)


def recipe(n_train: int, lr: float, seed: int, *, epochs: int = 2, min_steps: int = MIN_STEPS,
           max_steps: int | None = None) -> finetune.FinetuneConfig:
    """The fine-tuning settings for ``n_train`` examples: batch 16 up to 300 examples (else 32), ≥ ``min_steps``."""
    batch = 16 if n_train <= 300 else 32
    per_epoch = math.ceil(n_train / batch)
    epochs = max(epochs, math.ceil(min_steps / per_epoch))
    total = per_epoch * epochs if max_steps is None else min(per_epoch * epochs, max_steps)
    return finetune.FinetuneConfig(epochs=epochs, max_steps=max_steps, batch_size=batch, lr=lr, warmup=0.1,
                                   eval_every=max(1, total // 10), patience=None, seed=seed, log_every=10 ** 6,
                                   precision=PRECISION)


def old_recipe(n_train: int, lr: float, seed: int, *, epochs: int = 2,
               max_steps: int | None = None) -> finetune.FinetuneConfig:
    """The settings of the first model comparison, kept to count its collapses: batch 32, dev twice an epoch."""
    per_epoch = math.ceil(n_train / 32)
    return finetune.FinetuneConfig(epochs=epochs, max_steps=max_steps, batch_size=32, lr=lr, warmup=0.1,
                                   eval_every=max(1, per_epoch // 2), patience=3, seed=seed, log_every=10 ** 6,
                                   precision=PRECISION)


def _row(task: str, model: str, budget: int | None, seed: int, predictions: list[int], labels: list[int],
         dev_accuracy: float, extra: dict) -> dict:
    share = sum(predictions) / len(predictions)
    accuracy = sum(p == y for p, y in zip(predictions, labels, strict=True)) / len(labels)
    return {"task": task, "model": model, "budget": budget, "seed": seed, "test_accuracy": round(accuracy, 4),
            "dev_accuracy": round(dev_accuracy, 4), "predicted_positive_share": round(share, 4),
            "collapsed": max(share, 1 - share) >= COLLAPSE_SHARE, **extra}


def _examples(task: str, budget: int | None, seed: int, balanced: bool, quick: bool):
    """(train, dev, test) as (texts, labels): ``budget`` training labels (balanced or a plain random draw)."""
    splits = task_splits(task)
    labels = splits["train"][1]
    keep = (balanced_subset(task, labels, budget, seed) if balanced
            else finetune.subset(len(labels), budget, seed))
    dev_keep = balanced_subset(task, splits["dev"][1], DEV_EXAMPLES, 0)
    pick = lambda split, idx: ([splits[split][0][i] for i in idx], [splits[split][1][i] for i in idx])  # noqa: E731
    test = pick("test", range(200 if quick else len(splits["test"][1])))
    return pick("train", keep), pick("dev", dev_keep), test


def run_one(task: str, model: str, budget: int | None, seed: int, *, source: str | None = None,
            recipe_name: str = "balanced", quick: bool = False) -> dict:
    """Fine-tune ``model`` (a key of MODELS, ``bow``, or any key with ``source``) on ``budget`` labels of ``task``.

    ``recipe_name``: "balanced" (:func:`recipe`, balanced subsets) or "before" (:func:`old_recipe`, random subsets).
    """
    if recipe_name not in ("balanced", "before"):
        raise ValueError(f"recipe_name={recipe_name!r}: use 'balanced' or 'before'")
    train, dev, test = _examples(task, budget, seed, recipe_name == "balanced", quick)
    start = time.perf_counter()
    if model == "bow":
        return _bow_row(task, budget, seed, (train, dev, test), recipe_name, start)
    name, lr, min_steps, epochs = MODELS.get(model, (source, 5e-4, MIN_STEPS, 2))
    if name is None:
        raise ValueError(f"model={model!r}: use one of {', '.join([*MODELS, 'bow'])}, or pass source=<folder>")
    net, tokenizer = finetune.load_classifier(name, seed=seed)
    encoded = [finetune.encode(tokenizer, *split) for split in (train, dev, test)]
    max_steps = 20 if quick else None
    config = (recipe(len(train[1]), lr, seed, epochs=epochs, min_steps=min_steps, max_steps=max_steps)
              if recipe_name == "balanced" else old_recipe(len(train[1]), lr, seed, epochs=epochs, max_steps=max_steps))
    fit = finetune.fit(net, encoded[0], encoded[1], config, pad_token_id=tokenizer.pad_token_id, progress=False,
                       verbose=False)
    scored = finetune.evaluate(fit.model, encoded[2], pad_token_id=tokenizer.pad_token_id)
    return _row(task, model, budget, seed, scored.predictions, test[1], fit.best_dev["accuracy"],
                {"recipe": recipe_name, "n_train": len(train[1]), "steps": fit.steps, "best_step": fit.best_step,
                 "lr": lr, "batch_size": config.batch_size, "seconds": round(time.perf_counter() - start, 1)})


def _bow_row(task, budget, seed, splits, recipe_name, start) -> dict:
    """A unigram bag of words (words only: on word order it is at chance by construction), C chosen on dev."""
    train, dev, test = (SimpleNamespace(texts=texts, labels=labels) for texts, labels in splits)
    out = finetune.bag_of_words_baseline(train, dev, test, cs=(0.25, 1, 4, 16), ngram_range=(1, 1))
    (_, false_positive), (_, true_positive) = out["test"]["confusion"]
    share = (false_positive + true_positive) / out["test"]["examples"]
    return {"task": task, "model": "bow", "budget": budget, "seed": seed,
            "test_accuracy": round(out["test"]["accuracy"], 4), "dev_accuracy": round(out["dev"]["accuracy"], 4),
            "predicted_positive_share": round(share, 4), "collapsed": max(share, 1 - share) >= COLLAPSE_SHARE,
            "recipe": recipe_name, "n_train": len(train.labels), "C": out["C"],
            "seconds": round(time.perf_counter() - start, 1)}


def read_results(path: str | Path) -> dict:
    """The results document at ``path`` ({} when there is none yet)."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {}


def run_grid(path: str | Path, *, tasks=TASKS, models=(*MODELS, "bow"), budgets=BUDGETS, seeds=(0, 1, 2),
             sources: dict[str, str] | None = None, recipe_name: str = "balanced", quick: bool = False,
             command: str | None = None, log=print) -> list[dict]:
    """Run every (task, model, budget, seed) not yet in ``path`` and append its row (written atomically each time)."""
    path = Path(path)
    document = read_results(path)
    rows = document.setdefault("rows", [])
    if command:
        document.setdefault("commands", []).append(command)
    done = {(r["task"], r["model"], r["budget"], r["seed"], r.get("recipe", "balanced")) for r in rows}
    for task in tasks:
        for model in models:
            for budget in budgets:
                for seed in seeds:
                    if (task, model, budget, seed, recipe_name) in done:
                        continue
                    row = run_one(task, model, budget, seed, source=(sources or {}).get(model),
                                  recipe_name=recipe_name, quick=quick)
                    rows.append(row)
                    write_json_atomic(path, document | {"quick": quick})
                    log(f"{recipe_name}: {task} {model} {budget} seed {seed}: test {row['test_accuracy']:.3f}"
                        f"{' COLLAPSED' if row['collapsed'] else ''} ({row['seconds']} s)")
    return rows


def zero_shot_models(seed: int = 0) -> dict:
    """(masked-LM, tokenizer) for the zero-shot comparison: the course checkpoint, the same architecture with
    random weights, and MiniLM (whose MLM head is newly initialised) when its package is installed."""
    from transformers import BertForMaskedLM

    course, tokenizer = models.load_mlm("course")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = {"course": (course, tokenizer), "random": (BertForMaskedLM(course.config).eval(), tokenizer)}
        if models.minilm_dir() is not None:
            out["minilm"] = models.load_mlm("minilm")  # its new MLM head drawn from the same seeded generator
    return out


def collapse_counts(rows: list[dict]) -> dict[str, dict[str, int]]:
    """Per recipe: how many fine-tuned runs predicted one class for ≥ 95 % of the test set, out of how many.

    Bag-of-words rows are left out: on word order it gives both versions of a sentence the same label by
    construction, so its one-class predictions are not a failure of the recipe.
    """
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        if row["model"] != "bow":
            entry = counts.setdefault(row.get("recipe", "balanced"), {"collapsed": 0, "runs": 0})
            entry["collapsed"] += bool(row["collapsed"])
            entry["runs"] += 1
    return counts


def summarise(rows: list[dict], task: str) -> dict[str, list[dict]]:
    """Per model, per budget (in the order first seen): mean test accuracy over seeds, its standard error, a 95 %
    t-interval, the number of runs and how many of them collapsed."""
    groups: dict[tuple[str, int | None], list[dict]] = {}
    for row in rows:
        if row["task"] == task:
            groups.setdefault((row["model"], row["budget"]), []).append(row)
    out: dict[str, list[dict]] = {}
    for (model, budget), runs in groups.items():
        out.setdefault(model, []).append({"budget": budget, "n_train": runs[0]["n_train"], **_over_seeds(runs)})
    return out


def _over_seeds(runs: list[dict]) -> dict:
    from scipy import stats

    accuracies = [r["test_accuracy"] for r in runs]
    m, n = mean(accuracies), len(accuracies)
    se = stdev(accuracies) / math.sqrt(n) if n > 1 else float("nan")
    half = stats.t.ppf(0.975, n - 1) * se if n > 1 else float("nan")
    return {"mean": m, "se": se, "low": m - half, "high": m + half, "runs": n,
            "collapsed": sum(bool(r["collapsed"]) for r in runs)}
