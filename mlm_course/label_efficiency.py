"""What pretraining buys: accuracy against the number of labelled examples, per model, on two tasks (notebook 07).

Tasks: ``word_order`` (real sentence or a copy with words reordered, :mod:`mlm_course.word_order`) and
``sentiment`` (the movie-review sentences). Models: ``random`` (the course architecture, random weights),
``course`` (the course checkpoint), ``minilm`` (a real pretrained encoder), an adapted checkpoint given as a
folder, and ``bow`` (bag of words + logistic regression). The runs themselves are :mod:`mlm_course.lab.label_grid`;
here: the tasks' data, balanced subsets, and what the stored rows say (summaries over seeds, differences, collapses).

A run whose test predictions are ≥ 95 % one class is flagged ``collapsed``.
"""

from __future__ import annotations

import math
from statistics import mean, stdev

import torch

from mlm_course import corpus, word_order

TASKS = ("word_order", "sentiment")
LABEL_COUNTS = (50, 100, 300, 1000, None)  # training labels per run; None: every training label
COLLAPSE_SHARE = 0.95
#: the course checkpoint's PLL scores (:func:`mlm_course.word_order.pll_features`) + logistic regression; no fine-tuning
PLL_PROBE = "course_pll"
LINEAR_MODELS = ("bow", PLL_PROBE)  # fitted in closed form, not fine-tuned: never counted as collapsed runs


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
