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

import functools
import json
import math
import time
from pathlib import Path
from statistics import mean, stdev
from types import SimpleNamespace

import torch

from . import corpus, finetune, models, word_order
from .lab.run_files import write_json_atomic

TASKS = ("word_order", "sentiment")
BUDGETS = (50, 100, 300, 1000, None)  # None: every training label
#: key -> (name for finetune.load_classifier, learning rate, minimum optimiser steps, epochs over all labels)
MODELS = {"random": ("random:course", 5e-4, 600, 2), "course": ("course", 5e-4, 600, 2),
          "minilm": ("minilm", 1e-4, 300, 1)}
MIN_STEPS = 600
DEV_EXAMPLES = 400  # dev examples used for model selection (the whole word-order dev split)
COLLAPSE_SHARE = 0.95
#: the course checkpoint's PLL scores (:func:`mlm_course.word_order.pll_features`) + logistic regression; no fine-tuning
PLL_PROBE = "course_pll"
LINEAR_MODELS = ("bow", PLL_PROBE)  # fitted in closed form, not fine-tuned: never counted as collapsed runs
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
    return finetune.FinetuneConfig(epochs=epochs, max_steps=max_steps, batch_size=batch, lr=lr, warmup_ratio=0.1,
                                   eval_every=max(1, total // 10), patience=None, seed=seed, log_every=10 ** 6,
                                   precision=PRECISION)


def old_recipe(n_train: int, lr: float, seed: int, *, epochs: int = 2,
               max_steps: int | None = None) -> finetune.FinetuneConfig:
    """The settings of the first model comparison, kept to count its collapses: batch 32, dev twice an epoch."""
    per_epoch = math.ceil(n_train / 32)
    return finetune.FinetuneConfig(epochs=epochs, max_steps=max_steps, batch_size=32, lr=lr, warmup_ratio=0.1,
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
    if model in LINEAR_MODELS:
        out = _bow(train, dev, test) if model == "bow" else _pll_probe(task, train, dev, test)
        return _row(task, model, budget, seed, out["test_predictions"], test[1], out["dev"]["accuracy"],
                    {"recipe": recipe_name, "n_train": len(train[1]), "C": out["C"],
                     "seconds": round(time.perf_counter() - start, 1)})
    name, lr, min_steps, epochs = MODELS.get(model, (source, 5e-4, MIN_STEPS, 2))
    if name is None:
        raise ValueError(f"model={model!r}: use one of {', '.join([*MODELS, *LINEAR_MODELS])}, or pass source=<folder>")
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


def _bow(train, dev, test) -> dict:
    """A unigram bag of words (words only: on word order it is at chance by construction), C chosen on dev."""
    splits = (SimpleNamespace(texts=texts, labels=labels) for texts, labels in (train, dev, test))
    return finetune.bag_of_words_baseline(*splits, cs=(0.25, 1, 4, 16), ngram_range=(1, 1))


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


def run_grid(path: str | Path, *, tasks=TASKS, models=(*MODELS, "bow"), budgets=BUDGETS, seeds=(0, 1, 2),
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
                    row = run_one(task, model, budget, seed, source=(sources or {}).get(model),
                                  recipe_name=recipe_name, quick=quick)
                    rows.append(row)
                    write_json_atomic(path, document | {"quick": quick})
                    log(f"{recipe_name}: {task} {model} {budget} seed {seed}: test {row['test_accuracy']:.3f}"
                        f"{' COLLAPSED' if row['collapsed'] else ''} ({row['seconds']} s)")
    return rows


def merge_results(documents: list[dict]) -> dict:
    """One results document from several (grids run in parallel): rows, commands and the zero-shot table.

    Raises ValueError when two documents hold the same (task, model, budget, seed, recipe) run.
    """
    merged: dict = {"rows": [], "commands": []}
    seen: set[tuple] = set()
    for document in documents:
        for row in document.get("rows", []):
            key = run_key(row)
            if key in seen:
                raise ValueError(f"run {key} appears in two result files: keep one of them")
            seen.add(key)
            merged["rows"].append(row)
        merged["commands"] += document.get("commands", [])
        for key in ("zero_shot", "zero_shot_command"):
            if key in document:
                merged[key] = document[key]
        merged["quick"] = merged.get("quick", False) or document.get("quick", False)
    return merged


def describe_run(folder: str | Path) -> dict:
    """What a pretraining run folder says about itself: steps, seconds, held-out loss, and its training settings."""
    results = json.loads((Path(folder) / "results.json").read_text())
    keep = ("steps", "tokens_seen", "seconds", "heldout", "unigram_baseline", "train_config", "machine")
    return {"folder": str(folder), **{key: results[key] for key in keep if key in results}}


def review_masked_lm_loss(name_or_folder: str | Path, seq_len: int = 128) -> dict[str, float]:
    """Masked-LM loss, top-1 and top-5 of a checkpoint on the sentiment **dev** sentences (text no run trained on),
    packed into ``seq_len`` blocks with the frozen evaluation masks: how well it models movie-review language."""
    from . import pretraining

    model, tokenizer = models.load_mlm(str(name_or_folder))
    blocks = pretraining.pack_blocks(corpus.sentiment("dev").texts, tokenizer, seq_len)
    batches = pretraining.frozen_eval_batches(blocks, tokenizer, pretraining.MaskSpec())
    return pretraining.evaluate_masked_lm(model, batches)


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

    The linear rows (:data:`LINEAR_MODELS`) are left out: they are not fine-tuned, and on word order a bag of words
    gives both versions of a sentence the same label by construction, which is no failure of the recipe.
    """
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        if row["model"] not in LINEAR_MODELS:
            entry = counts.setdefault(row.get("recipe", "balanced"), {"collapsed": 0, "runs": 0})
            entry["collapsed"] += bool(row["collapsed"])
            entry["runs"] += 1
    return counts


def summarise(rows: list[dict], task: str) -> dict[str, list[dict]]:
    """Per model (in the order first seen), per budget (fewest labels first): mean test accuracy over seeds, its
    standard error, a 95 % t-interval, the number of runs and how many of them collapsed."""
    groups: dict[tuple[str, int | None], list[dict]] = {}
    for row in rows:
        if row["task"] == task:
            groups.setdefault((row["model"], row["budget"]), []).append(row)
    out: dict[str, list[dict]] = {}
    for (model, budget), runs in groups.items():
        out.setdefault(model, []).append({"budget": budget, "n_train": runs[0]["n_train"], **_over_seeds(runs)})
    return {model: sorted(entries, key=lambda e: e["n_train"]) for model, entries in out.items()}


def _over_seeds(runs: list[dict]) -> dict:
    from scipy import stats

    accuracies = [r["test_accuracy"] for r in runs]
    m, n = mean(accuracies), len(accuracies)
    se = stdev(accuracies) / math.sqrt(n) if n > 1 else float("nan")
    half = stats.t.ppf(0.975, n - 1) * se if n > 1 else float("nan")
    return {"mean": m, "se": se, "low": m - half, "high": m + half, "runs": n,
            "collapsed": sum(bool(r["collapsed"]) for r in runs)}


def summary_table(summary: dict[str, list[dict]]) -> str:
    """:func:`summarise`'s output as text: one row per model, one column per label budget, each cell the mean test
    accuracy ± the half-width of its 95 % t-interval, ``*k`` when k of its runs collapsed to one class."""
    budgets = sorted({(e["budget"] is None, e["n_train"]) for entries in summary.values() for e in entries})
    heads = [f"all {n:,}" if every else f"{n:,}" for every, n in budgets]
    lines = [f"{'model':<8}" + "".join(f"{h:>16}" for h in heads)]
    for model, entries in summary.items():
        by_budget = {(e["budget"] is None, e["n_train"]): e for e in entries}
        cells = []
        for key in budgets:
            e = by_budget.get(key)
            cell = "" if e is None else f"{e['mean']:.1%} ±{(e['high'] - e['mean']) * 100:.1f}"
            cells.append(cell + (f" *{e['collapsed']}" if e and e["collapsed"] else ""))
        lines.append(f"{model:<8}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def collapse_table(rows: list[dict]) -> str:
    """Per recipe, task and model: runs that predicted one class for ≥ 95 % of the test set, the optimiser steps
    those runs had taken and their best dev accuracy (the linear rows left out, see :func:`collapse_counts`)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        if row["model"] not in LINEAR_MODELS:
            groups.setdefault((row.get("recipe", "balanced"), row["task"], row["model"]), []).append(row)
    span = lambda xs, fmt: "–" if not xs else fmt(xs[0]) if xs[0] == xs[-1] else f"{fmt(xs[0])}–{fmt(xs[-1])}"  # noqa: E731
    lines = [f"{'recipe':<10}{'task':<12}{'model':<8}{'collapsed':>12}   {'their steps':<13}their best dev accuracy"]
    for (recipe_name, task, model), runs in groups.items():
        collapsed = [r for r in runs if r["collapsed"]]
        steps = span(sorted(r["steps"] for r in collapsed), str)
        dev = span(sorted(r["dev_accuracy"] for r in collapsed), lambda a: f"{a:.1%}")
        lines.append(f"{recipe_name:<10}{task:<12}{model:<8}{len(collapsed):>5} of {len(runs):<4}   {steps:<13}{dev}")
    return "\n".join(lines)


def differences(rows: list[dict], task: str, model: str, baseline: str) -> dict[int | None, tuple[float, float]]:
    """Per label budget both have run: (mean test accuracy of ``model`` − that of ``baseline``, the combined standard
    error √(se₁² + se₂²)) — a gap larger than twice the combined error is unlikely to be seed noise."""
    summary = summarise(rows, task)
    if model not in summary or baseline not in summary:
        raise ValueError(f"no {task} runs of {model!r} or of {baseline!r} in these rows")
    theirs = {e["budget"]: e for e in summary[baseline]}
    return {e["budget"]: (e["mean"] - theirs[e["budget"]]["mean"], math.hypot(e["se"], theirs[e["budget"]]["se"]))
            for e in summary[model] if e["budget"] in theirs}
