"""Masking ablations (notebook 08): pretrain with one masking choice changed, then measure the encoder.

Three families, each against BERT's recipe (15 % of tokens, 80/10/10, a fresh mask every step):

- ``mix``: the replacement mix at 15 %, the six rows of Table 8 of the BERT paper (Devlin et al., 2019);
- ``rate``: 15 / 30 / 40 / 60 % of tokens selected (Wettig et al., 2022: 40 % beat 15 % for BERT-large);
- ``static``: one mask per sequence made once (the original BERT's data duplication, ``copies`` masks in all)
  vs a fresh mask every time (RoBERTa §4.1), over many epochs of a small slice of the corpus, where it can matter.

Every run is scored the same way: held-out masked-LM loss on frozen 15 % 80/10/10 masks (the same for all runs),
fine-tuning accuracy on the sentiment task, and a feature-based probe (frozen mean-pooled features + logistic
regression, the analogue of the paper's feature-based NER column).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mlm_course import finetune
from mlm_course.masking import MaskSpec
from mlm_course.models import evaluation_mode
from mlm_course.statistics import holm, mean_interval, paired_t

FAMILIES = ("mix", "rate", "static")

#: Table 8 of Devlin et al. (2019): BERT-base dev results by replacement mix (MASK, SAME, RND in %; the paper's
#: column order), MNLI fine-tuned accuracy, NER F1 fine-tuned and feature-based.
PAPER_TABLE8: tuple[dict, ...] = (
    {"mask": 80, "same": 10, "random": 10, "mnli": 84.2, "ner_finetune": 95.4, "ner_feature": 94.9},
    {"mask": 100, "same": 0, "random": 0, "mnli": 84.3, "ner_finetune": 94.9, "ner_feature": 94.0},
    {"mask": 80, "same": 0, "random": 20, "mnli": 84.1, "ner_finetune": 95.2, "ner_feature": 94.6},
    {"mask": 80, "same": 20, "random": 0, "mnli": 84.4, "ner_finetune": 95.2, "ner_feature": 94.7},
    {"mask": 0, "same": 20, "random": 80, "mnli": 83.7, "ner_finetune": 94.8, "ner_feature": 94.6},
    {"mask": 0, "same": 0, "random": 100, "mnli": 83.6, "ner_finetune": 94.9, "ner_feature": 94.6},
)
RATES = (0.15, 0.30, 0.40, 0.60)


@dataclass(frozen=True)
class Variant:
    """One pretraining recipe of the grid, its settings named as ``mlm-course pretrain`` names them: ``mask_mix`` is
    (MASK, RANDOM, SAME) as in :mod:`mlm_course.masking`."""

    family: str
    label: str
    mask_rate: float = 0.15
    mask_mix: tuple[float, float, float] = (0.8, 0.1, 0.1)
    static_copies: int | None = None  # None: dynamic masking
    small_data: bool = False  # pretrain on the budget's small slice of the corpus (many epochs)

    @property
    def spec(self) -> MaskSpec:
        return MaskSpec(mask_rate=self.mask_rate, mask_mix=self.mask_mix)

    @property
    def key(self) -> str:
        """Folder name of the run; variants of different families that train identically share it."""
        mix = "-".join(f"{round(100 * share)}" for share in self.mask_mix)
        masking = f"static{self.static_copies}" if self.static_copies else "dynamic"
        data = "-small" if self.small_data else ""
        return f"rate{round(100 * self.mask_rate)}-mix{mix}-{masking}{data}"


def table8_label(mask: int, same: int, random: int) -> str:
    """The paper's way of naming a mix: MASK/SAME/RND in percent."""
    return f"{mask}/{same}/{random}"


def variants(families: Sequence[str] = FAMILIES, static_copies: int = 1) -> list[Variant]:
    """The grid: Table 8's six mixes, the four rates, and dynamic vs static masking on a small slice."""
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown families {sorted(unknown)}: choose from {', '.join(FAMILIES)}")
    grid = []
    if "mix" in families:
        for row in PAPER_TABLE8:
            mix = (row["mask"] / 100, row["random"] / 100, row["same"] / 100)
            grid.append(Variant("mix", table8_label(row["mask"], row["same"], row["random"]), mask_mix=mix))
    if "rate" in families:
        grid += [Variant("rate", f"{round(100 * rate)} %", mask_rate=rate) for rate in RATES]
    if "static" in families:
        grid += [Variant("static", "dynamic", small_data=True),
                 Variant("static", f"static ({static_copies} mask{'s' if static_copies > 1 else ''})",
                         static_copies=static_copies, small_data=True)]
    return grid


@torch.no_grad()
def sentence_features(encoder: torch.nn.Module, data: finetune.Encoded, pad_token_id: int,
                      batch_size: int = 256) -> np.ndarray:
    """Mean of ``encoder``'s last hidden states (a :class:`~mlm_course.bert.BertMLM`) over each
    sentence's tokens ([CLS] and [SEP] included), frozen."""
    rows = []
    with evaluation_mode(encoder):
        for begin in range(0, len(data), batch_size):
            features = [{"input_ids": ids, "label": 0, "index": 0} for ids in data.input_ids[begin: begin + batch_size]]
            batch = finetune.pad_batch(features, pad_token_id=pad_token_id)
            hidden = encoder.last_hidden_state(batch["input_ids"], batch["attention_mask"])
            weights = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            rows.append(((hidden * weights).sum(1) / weights.sum(1)).float().numpy())
    return np.concatenate(rows)


def feature_probe(encoder: torch.nn.Module, sentiment: dict[str, finetune.Encoded], pad_token_id: int,
                  strengths: Sequence[float] = (0.01, 0.1, 1.0, 10.0)) -> dict[str, float]:
    """Frozen features + logistic regression: the inverse regularisation strength is chosen on dev."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = {split: sentence_features(encoder, data, pad_token_id) for split, data in sentiment.items()}
    y = {split: np.asarray(data.labels) for split, data in sentiment.items()}
    best = None
    for c in strengths:
        probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000)).fit(x["train"], y["train"])
        dev = float(probe.score(x["dev"], y["dev"]))
        if best is None or dev > best[0]:
            best = (dev, c, probe)
    dev, c, probe = best
    return {"dev_accuracy": dev, "test_accuracy": float(probe.score(x["test"], y["test"])), "C": c}


METRICS: dict[str, Callable[[dict], float]] = {
    "heldout_loss": lambda row: row["heldout"]["loss"],
    "heldout_top1": lambda row: row["heldout"]["top1"],
    "finetune_acc": lambda row: row["finetune"]["test_accuracy"],
    "probe_acc": lambda row: row["probe"]["test_accuracy"],
    # the held-out loss split by what the frozen 80/10/10 evaluation did at each position (runs since 2026-11-30)
    **{f"heldout_loss_{name}": (lambda row, action=action: row["heldout_by_action"][action]["loss"])
       for name, action in (("mask", "[MASK]"), ("random", "random token"), ("unchanged", "unchanged"))},
}


def _measured(get: Callable[[dict], float], runs: Sequence[dict]) -> list[float]:
    """``get`` of every run that measured it (held-out-only runs have no fine-tuning; older runs no split)."""
    values = []
    for run in runs:
        try:
            values.append(get(run))
        except KeyError:
            continue
    return values


def summarise(rows: Sequence[dict], static_copies: int, families: Sequence[str] = FAMILIES) -> list[dict]:
    """One line per variant of the grid (the static family with ``static_copies``): every metric's per-seed ``values`` and their (mean, half-width of the 95 %
    t-interval), :func:`mlm_course.statistics.mean_interval`."""
    by_key: dict[str, list[dict]] = {}
    for row in rows:
        by_key.setdefault(row["key"], []).append(row)
    lines = []
    for variant in variants(families, static_copies=static_copies):
        runs = by_key.get(variant.key, [])
        line = {"family": variant.family, "label": variant.label, "key": variant.key, "seeds": len(runs),
                "mask_rate": variant.mask_rate, "mask_mix": list(variant.mask_mix),
                "static_copies": variant.static_copies}
        line["values"] = {name: _measured(get, runs) for name, get in METRICS.items()}
        for name, values in line["values"].items():
            line[name] = mean_interval(values) if values else (math.nan, math.nan)
        lines.append(line)
    return lines


def against_reference(rows: Sequence[dict], reference: str, keys: Sequence[str], metrics: Sequence[str]) -> list[dict]:
    """Each variant of ``keys`` against the ``reference`` variant on each of ``metrics`` (names of :data:`METRICS`),
    paired by seed — seed k of every variant starts from the same weights and reads the same data order — with
    :func:`mlm_course.statistics.paired_t`, and Holm's correction over all of them (one family)."""
    by_seed = {(row["key"], row["seed"]): row for row in rows}
    tests = []
    for key in keys:
        seeds = sorted(s for k, s in by_seed if k == key and (reference, s) in by_seed)
        for metric in metrics:
            get = METRICS[metric]
            pairs = [(get(by_seed[key, s]), get(by_seed[reference, s])) for s in seeds]
            result = paired_t([a for a, _ in pairs], [b for _, b in pairs])
            tests.append({"key": key, "reference": reference, "metric": metric, **result})
    p_values = [1.0 if math.isnan(t["p"]) else t["p"] for t in tests]  # identical on every seed: no evidence
    for test, decision in zip(tests, holm(p_values), strict=True):
        test.update(adjusted_p=decision.adjusted_p, detected=decision.rejected)
    return tests


def load_results(path: str | Path) -> dict:
    """A results file written by ``scripts/run_ablations.py``; a clear error when it is missing."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: produce it with `python scripts/run_ablations.py`")
    return json.loads(path.read_text())


def _mean_pm(values: Sequence[float], digits: int, scale: float = 1) -> str:
    """``values`` × ``scale`` as "mean ± half-width of the 95 % t-interval"; the mean alone for one seed."""
    if not values:
        return "–"
    mean, half = mean_interval([scale * v for v in values])
    return f"{mean:.{digits}f}" if math.isnan(half) else f"{mean:.{digits}f} ± {half:.{digits}f}"


def summary_table(document: dict, family: str) -> str:
    """A plain-text table of one family's mean ± half-width of the 95 % t-interval over seeds (and, for ``mix``, the
    paper's numbers beside them)."""
    lines = [line for line in document["summary"] if line["family"] == family]
    paper = {table8_label(r["mask"], r["same"], r["random"]): r for r in document.get("paper_table8", [])}
    head = f"{'variant':<18}{'seeds':>6}{'held-out loss':>18}{'fine-tune acc':>18}{'probe acc':>18}"
    if family == "mix":
        head += f"{'paper MNLI':>12}{'NER ft':>8}{'NER fb':>8}"
    out = [head]
    for line in lines:
        cells = [f"{line['label']:<18}{line['seeds']:>6}"]
        for name, digits, scale in (("heldout_loss", 3, 1), ("finetune_acc", 1, 100), ("probe_acc", 1, 100)):
            cells.append(f"{_mean_pm(line['values'][name], digits, scale):>18}")
        if family == "mix" and line["label"] in paper:
            p = paper[line["label"]]
            cells.append(f"{p['mnli']:>12.1f}{p['ner_finetune']:>8.1f}{p['ner_feature']:>8.1f}")
        out.append("".join(cells))
    return "\n".join(out)


def by_action_table(document: dict, family: str) -> str:
    """Held-out loss by what the frozen 80/10/10 evaluation did at each position: mean ± half-width of the 95 %
    t-interval over the seeds."""
    titles = {"all": "all", "[MASK]": "[MASK] (80 %)", "random token": "random (10 %)", "unchanged": "unchanged (10 %)"}
    names = [(titles[action], metric) for action, metric in ACTIONS]
    out = [f"{'variant':<12}{'seeds':>6}" + "".join(f"{title:>18}" for title, _ in names)]
    for line in (line for line in document["summary"] if line["family"] == family):
        cells = [f"{line['label']:<12}{len(line['values']['heldout_loss_mask']):>6}"]
        for _, name in names:
            cells.append(f"{_mean_pm(line['values'][name], 3):>18}")
        out.append("".join(cells))
    return "\n".join(out)


ACTIONS = (("all", "heldout_loss"), ("[MASK]", "heldout_loss_mask"), ("random token", "heldout_loss_random"),
           ("unchanged", "heldout_loss_unchanged"))
"""What the frozen evaluation showed at a position (as :func:`mlm_course.objective_bug.evaluate_by_action` names
it), and the name in :data:`METRICS` of the held-out loss there."""


def by_action_means(document: dict, family: str) -> dict[str, dict[str, dict[str, float]]]:
    """``{variant label: {action: {"loss", "loss_ci95", "tokens"}}}`` for the variants of ``family``: the held-out
    loss at each kind of position, as the mean over seeds and the half-width of its 95 % t-interval — what
    :func:`mlm_course.plots.ablation_loss_by_action` draws. Variants without the split are left out."""
    runs = {row["key"]: row for row in document["runs"] if "heldout_by_action" in row}
    means = {}
    for line in (line for line in document["summary"] if line["family"] == family and line["key"] in runs):
        split = runs[line["key"]]["heldout_by_action"]
        means[line["label"]] = {}
        for action, metric in ACTIONS:
            mean, half = mean_interval(line["values"][metric])
            means[line["label"]][action] = {"loss": mean, "loss_ci95": half, "tokens": split[action]["tokens"]}
    return means
