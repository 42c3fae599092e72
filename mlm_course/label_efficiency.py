"""What pretraining buys: accuracy against the number of labelled examples, per model, on two tasks (notebook 07).

Tasks: ``word_order`` (real sentence or a copy with words reordered, :mod:`mlm_course.word_order`) and
``sentiment`` (the movie-review sentences). Models: ``random`` (the course architecture, random weights),
``course`` (the course checkpoint), ``minilm`` (a real pretrained encoder), ``tapt`` (the course checkpoint after
task-adaptive pretraining on the unlabelled review training text, given as a folder), and ``bow`` / ``bow_pairs``
(a bag of words, or of words and word pairs, + logistic regression). The runs themselves are :mod:`mlm_course.lab.label_grid`;
here: the tasks' data, balanced subsets, and what the stored rows say (summaries over seeds, differences, collapses).

A run whose test predictions are ≥ 95 % one class is flagged ``collapsed``.
"""

from __future__ import annotations

import math

import torch

from mlm_course import corpus, word_order
from mlm_course.statistics import (
    exact_mcnemar,
    holm,
    paired_bootstrap,
    paired_t,
    standard_error,
    t_half_width,
)

TASKS = ("word_order", "sentiment")
LABEL_COUNTS = (50, 100, 300, 1000, None)  # training labels per run; None: every training label
COLLAPSE_SHARE = 0.95
#: the course checkpoint's PLL scores (:func:`mlm_course.word_order.pll_features`) + logistic regression; no fine-tuning
PLL_PROBE = "course_pll"
#: the bags of words: the n-gram range of each (single words; words and adjacent word pairs)
BOW_NGRAMS = {"bow": (1, 1), "bow_pairs": (1, 2)}
LINEAR_MODELS = (*BOW_NGRAMS, PLL_PROBE)  # fitted in closed form, not fine-tuned: never counted as collapsed runs


def collapse(predictions: list[int]) -> tuple[float, bool]:
    """(share of ``predictions`` that are 1, whether one class holds ≥ :data:`COLLAPSE_SHARE` of them)."""
    if not predictions:
        raise ValueError("no predictions: pass one 0/1 prediction per test sentence.")
    share = sum(int(p) for p in predictions) / len(predictions)
    return share, max(share, 1 - share) >= COLLAPSE_SHARE


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


#: the order in which summaries list the models (others follow, in the order first seen)
MODEL_ORDER = ("random", "course", "tapt", PLL_PROBE, "minilm", *BOW_NGRAMS)


def summarise(rows: list[dict], task: str) -> dict[str, list[dict]]:
    """Per model (in :data:`MODEL_ORDER`), per budget (fewest labels first): mean test accuracy over seeds, its
    standard error, a 95 % t-interval, the number of runs and how many of them collapsed."""
    groups: dict[tuple[str, int | None], list[dict]] = {}
    for row in rows:
        if row["task"] == task:
            groups.setdefault((row["model"], row["budget"]), []).append(row)
    out: dict[str, list[dict]] = {}
    for (model, budget), runs in groups.items():
        out.setdefault(model, []).append({"budget": budget, "n_train": runs[0]["n_train"], **_over_seeds(runs)})
    order = [m for m in MODEL_ORDER if m in out] + [m for m in out if m not in MODEL_ORDER]
    return {model: sorted(out[model], key=lambda e: e["n_train"]) for model in order}


def _over_seeds(runs: list[dict]) -> dict:
    accuracies = [r["test_accuracy"] for r in runs]
    m, se = sum(accuracies) / len(accuracies), standard_error(accuracies)
    half = t_half_width(se, len(accuracies))
    return {"mean": m, "se": se, "low": m - half, "high": m + half, "runs": len(runs),
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


def differences(rows: list[dict], task: str, model: str, baseline: str) -> dict[int | None, dict]:
    """Per label budget both have run: ``model`` − ``baseline`` in test accuracy, paired over seeds (seed k of both
    saw the same labelled subset): :func:`mlm_course.statistics.paired_t` — the mean difference, its 95 %
    interval and p — over the seeds both ran. A budget where they share fewer than two seeds is left out (a
    paired t needs two pairs)."""
    groups: dict[str, dict[int | None, dict[int, float]]] = {model: {}, baseline: {}}
    for row in rows:
        if row["task"] == task and row["model"] in groups:
            groups[row["model"]].setdefault(row["budget"], {})[row["seed"]] = row["test_accuracy"]
    if not groups[model] or not groups[baseline]:
        raise ValueError(f"no {task} runs of {model!r} or of {baseline!r} in these rows")
    out = {}
    for budget in sorted(set(groups[model]) & set(groups[baseline]), key=lambda b: math.inf if b is None else b):
        seeds = sorted(set(groups[model][budget]) & set(groups[baseline][budget]))
        if len(seeds) < 2:
            continue
        out[budget] = paired_t([groups[model][budget][s] for s in seeds], [groups[baseline][budget][s] for s in seeds])
    return out


def compared(rows: list[dict], comparisons: list[tuple[str, str, str]]) -> list[dict]:
    """Each (task, model, baseline) of ``comparisons`` over the whole grid, one test per comparison: in how many of
    the paired runs — same task, budget and seed, so the same labelled subset — ``model`` beats ``baseline``, with
    the exact sign test (:func:`mlm_course.statistics.exact_mcnemar` on who is ahead; ties drop out) and Holm's
    correction over the comparisons. ``by_budget`` holds the paired-t difference of each budget
    (:func:`differences`) to show the size; with three seeds a budget alone can show only large effects."""
    tests = []
    n_train = {(r["task"], r["model"], r["budget"]): r["n_train"] for r in rows}
    for task, model, baseline in comparisons:
        accuracy = {(r["model"], r["budget"], r["seed"]): r["test_accuracy"] for r in rows if r["task"] == task}
        pairs = [(accuracy[model, b, s], accuracy[baseline, b, s]) for (m, b, s) in accuracy
                 if m == model and (baseline, b, s) in accuracy]
        if not pairs:
            raise ValueError(f"no {task} runs of {model!r} and {baseline!r} with the same budget and seed")
        ahead, behind = [int(a > b) for a, b in pairs], [int(b > a) for a, b in pairs]
        by_budget = [{"budget": budget, "n_train": n_train[task, model, budget], **result}
                     for budget, result in differences(rows, task, model, baseline).items()]
        tests.append({"task": task, "model": model, "baseline": baseline, "runs": len(pairs), "ahead": sum(ahead),
                      "behind": sum(behind), "p": exact_mcnemar(ahead, behind)["p"], "by_budget": by_budget})
    for test, decision in zip(tests, holm([t["p"] for t in tests]), strict=True):
        test.update(adjusted_p=decision.adjusted_p, detected=decision.rejected)
    return tests


def zero_shot_comparisons(table: dict[str, dict[str, dict]], reference: str = "course") -> list[dict]:
    """``reference`` against every other scorer of each domain of a zero-shot ``table`` ({domain: {scorer: result
    with per-pair "outcomes"}}), on the same pairs: the difference in accuracy with a paired bootstrap 95 %
    interval, the exact McNemar p (:mod:`mlm_course.statistics`), and Holm's correction over all of them."""
    tests = []
    for domain, scorers in table.items():
        ours = scorers[reference]["outcomes"]
        for scorer, result in scorers.items():
            if scorer == reference or "outcomes" not in result:
                continue
            interval = paired_bootstrap(ours, result["outcomes"])
            test = exact_mcnemar(ours, result["outcomes"])
            tests.append({"domain": domain, "reference": reference, "scorer": scorer, **interval,
                          "only_reference": test["only_a"], "only_scorer": test["only_b"], "p": test["p"]})
    for test, decision in zip(tests, holm([t["p"] for t in tests]), strict=True):
        test.update(adjusted_p=decision.adjusted_p, detected=decision.rejected)
    return tests
