"""Figures of 06_pretraining: loss and accuracy curves, fill-mask guesses, accuracy by frequency."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mlm_course.plots.language import localised, mark_as_data
from mlm_course.plots.style import OKABE_ITO, text_width_in

#: the reference lines of :func:`pretraining_curves`: (name, colour, line style), the same in both panels
BASELINE_STYLES = (("unigram", "black", "--"), ("unigram + copying", OKABE_ITO["reddish purple"], "-."))
TRAINING_COLOUR, HELDOUT_COLOUR = OKABE_ITO["sky blue"], OKABE_ITO["vermillion"]


def _mark_stages(metrics: list[dict], axes) -> None:
    """A dotted vertical line in each panel where a later stage starts, named at the top of the first panel: each
    stage restarts AdamW and its warm-up, which is why the curves jump there."""
    for before, after in zip(metrics, metrics[1:], strict=False):
        if after.get("stage", 1) != before.get("stage", 1):
            for ax in axes:
                ax.axvline(before["step"], color="#555555", ls=":", lw=1.2, zorder=1)
            axes[0].annotate(f"stage {after['stage']} (fresh warm-up)", (before["step"], 1),
                             xycoords=("data", "axes fraction"), xytext=(3, -3), textcoords="offset points",
                             va="top", fontsize=9, color="#555555")


def _label_levels(ax, levels: list[tuple[float, str, str]], *, gap_pt: float = 12.0) -> None:
    """Name each horizontal line ``(y, text, colour)`` just right of ``ax``, at its level; labels closer than
    ``gap_pt`` are pushed apart (a short leader joins a moved label to its line)."""
    fig = ax.figure
    fig.draw_without_rendering()  # the layout fixes the axes' height, hence where each level is drawn
    scale = 72 / fig.dpi
    box = ax.get_window_extent()
    ordered = sorted((ax.transData.transform((0, y))[1] * scale, y, text, colour) for y, text, colour in levels)
    wanted = [pt for pt, *_ in ordered]
    placed = []
    for pt in wanted:  # upwards from the lowest, each at least gap_pt above the one below
        placed.append(max(pt, placed[-1] + gap_pt) if placed else pt)
    top = box.y1 * scale
    for i in reversed(range(len(placed))):  # then down again from the top edge if the stack ran over it
        placed[i] = min(placed[i], top if i == len(placed) - 1 else placed[i + 1] - gap_pt)
    for (pt, y, text, colour), at in zip(ordered, placed, strict=True):
        moved = abs(at - pt) > 1
        ax.annotate(text, (1, y), xycoords=("axes fraction", "data"), xytext=(14 if moved else 4, at - pt),
                    textcoords="offset points", va="center", ha="left", fontsize=9, color=colour,
                    annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.8, "shrinkA": 1, "shrinkB": 0}
                    if moved else None)


def _accuracy_limits(ax, values: list[float]) -> None:
    """Accuracy from zero, a little below it so that a marker at 0 is not cut by the axis."""
    top = max([*values, 0.05]) * 1.08
    ax.set_ylim(-0.025 * top, top)


@localised
def pretraining_curves(metrics: list[dict], *, baseline: dict | None = None, copying: dict | None = None,
                       title: str = "") -> Figure:
    """Training loss (per log interval) and held-out loss (top) and held-out top-1 / top-5 (bottom) by step
    (``metrics`` from :func:`mlm_course.stored.read_metrics`), with the unigram baseline (``baseline``) and the
    unigram-plus-copying one (``copying``, :func:`mlm_course.pretraining.copying_baseline`), each named at its level
    right of the panel (black dashed: unigram; purple dash-dot: unigram + copying).

    Training batches are a thin sky-blue line; held-out evaluations are vermillion circles joined by a line (top-1
    blue circles, top-5 orange squares below); the legend sits under the panels. Rows with a ``stage`` number
    (joined runs of continued pretraining) get a dotted line where each later stage starts, named at the top: each
    stage restarts AdamW and its warm-up, so the curves jump there.
    """
    train = [m for m in metrics if m["split"] == "train"]
    evals = [m for m in metrics if m["split"] == "eval"]
    blue, orange = OKABE_ITO["blue"], OKABE_ITO["orange"]
    fig, (ax_loss, ax_acc) = plt.subplots(2, 1, figsize=(9.8, 7.0), sharex=True, layout="constrained")
    _mark_stages(metrics, (ax_loss, ax_acc))
    steps = [m["step"] for m in evals]
    size = 4.5 if len(evals) <= 40 else 3.5
    ax_loss.plot([m["step"] for m in train], [m["loss"] for m in train], lw=0.8, alpha=0.8, color=TRAINING_COLOUR,
                 zorder=2, label="training batches\n(mean per log interval)")
    ax_loss.plot(steps, [m["loss"] for m in evals], "o-", lw=1.0, ms=size, color=HELDOUT_COLOUR, zorder=3,
                 label="held-out set\n(frozen masks)")
    for metric, marker, color in (("top1", "o", blue), ("top5", "s", orange)):
        ax_acc.plot(steps, [m[metric] for m in evals], f"{marker}-", lw=1.0, ms=size, color=color, zorder=3,
                    label=f"model {metric}")
    loss_levels, acc_levels = [], []
    for (name, color, style), row in zip(BASELINE_STYLES, (baseline, copying), strict=True):
        if row is None:
            continue
        ax_loss.axhline(row["loss"], color=color, ls=style, lw=1.2, zorder=1, label=f"{name} ({row['loss']:.2f})")
        loss_levels.append((row["loss"], f"{name} ({row['loss']:.2f})", color))
        for metric in ("top1", "top5"):
            ax_acc.axhline(row[metric], color=color, ls=style, lw=1.2, zorder=1, label=f"{name} {metric}")
            acc_levels.append((row[metric], f"{name} {metric}", color))
    ax_loss.set(ylabel="masked-token cross-entropy (nats)", title=title or "loss")
    ax_acc.set(xlabel="optimiser step", ylabel="held-out accuracy on masked tokens")
    _accuracy_limits(ax_acc, [m[k] for m in evals for k in ("top1", "top5")] + [v for v, *_ in acc_levels])
    handles = [*ax_loss.lines, *ax_acc.lines]
    shown = [h for h in handles if h.get_label() in ("training batches\n(mean per log interval)",
                                                     "held-out set\n(frozen masks)", "model top1", "model top5")]
    fig.legend(handles=shown, loc="outside lower center", ncol=4, fontsize=9, frameon=False, markerscale=1.3)
    for ax, levels in ((ax_loss, loss_levels), (ax_acc, acc_levels)):
        if levels:
            _label_levels(ax, levels)
    return fig


_ACCEPTED, _OTHER = OKABE_ITO["bluish green"], "#aaaaaa"


def _fill_mask_legend(fig, note: str = "") -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=_ACCEPTED, label="an accepted answer"), Patch(color=_OTHER, label="another guess")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=9, frameon=False, title=note or None,
               title_fontsize=9)


def _fill_mask_table(rows) -> Figure:
    """One line per sentence (✓: an accepted answer among its guesses), its guesses in rank order beside it."""
    from matplotlib.patches import Rectangle

    top = max(len(guesses) for _, guesses, _ in rows)
    cells = [[(t, p, t in answers) for t, p in guesses] for _, guesses, answers in rows]
    hits = [any(ok for *_, ok in row) for row in cells]
    labels = [f"{'✓' if hit else '✗'} {text}" for (text, _, _), hit in zip(rows, hits, strict=True)]
    cell_in = max(0.9, *(text_width_in(f"{t} {100 * p:.0f} %", weight="bold") + 0.15 for row in cells for t, p, _ in row))
    label_in = max(text_width_in(s) for s in labels) + 0.2
    fig, ax = plt.subplots(figsize=(min(9.8, label_in + top * cell_in + 0.1), 0.3 * len(rows) + 1.5),
                           layout="constrained")
    for r, row in enumerate(cells):
        for c, (token, p, ok) in enumerate(row):
            ax.add_patch(Rectangle((c + 0.02, r - 0.36), 0.96 * p, 0.72, color=_ACCEPTED if ok else _OTHER, lw=0))
            mark_as_data(ax.text(c + 0.05, r, f"{token} {100 * p:.0f} %", va="center", fontsize=9,
                                 fontweight="bold" if ok else "normal"))
    for c in range(top + 1):
        ax.axvline(c, color="#dddddd", lw=0.8, zorder=0)
    ax.set(xlim=(0, top), ylim=(len(rows) - 0.5, -0.5))
    ax.set_xticks([c + 0.5 for c in range(top)], [f"guess {c + 1}" for c in range(top)], fontsize=9)
    ax.set_yticks(range(len(rows)), labels, fontsize=9)
    mark_as_data(ax.yaxis)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(f"Top-{top} fill-mask guesses: an accepted answer among them for {sum(hits)} of {len(rows)} "
                 "sentences", fontsize=10)
    _fill_mask_legend(fig, "bar length: the model's probability (a whole cell = 100 %)")
    return fig


@localised
def fill_mask_bars(rows: list[tuple[str, list[tuple[str, float]], set[str]]], *, columns: int = 3,
                   layout: str = "panels") -> Figure:
    """The top-k guesses and their probabilities for each ``(sentence, guesses, accepted answers)``; accepted
    answers in green (a legend says so). ``layout="panels"``: one small bar chart per sentence, ``columns`` to a
    row; ``layout="table"``: one line per sentence with its guesses in rank order (20 sentences fit in 7.5 in)."""
    import textwrap

    if layout not in ("panels", "table"):
        raise ValueError(f"layout={layout!r}: use 'panels' or 'table'.")
    if layout == "table":
        return _fill_mask_table(rows)
    n_rows = -(-len(rows) // columns)
    fig, axes = plt.subplots(n_rows, columns, figsize=(min(9.7, 3.3 * columns), 2.3 * n_rows + 0.4), squeeze=False,
                             layout="constrained")
    for ax, (text, guesses, answers) in zip(axes.flat, rows, strict=False):
        tokens = [t for t, _ in guesses][::-1]
        probs = [p for _, p in guesses][::-1]
        ax.barh(tokens, probs, color=[_ACCEPTED if t in answers else _OTHER for t in tokens])
        mark_as_data(ax.set_title(textwrap.fill(text, 30), fontsize=9), ax.yaxis)
        ax.set_xlim(0, 1)
        ax.set_xlabel("probability", fontsize=9)
        ax.tick_params(labelsize=9)
    for ax in axes.flat[len(rows):]:
        ax.axis("off")
    _fill_mask_legend(fig)
    return fig


@localised
def accuracy_by_frequency(buckets: list[dict], *, title: str = "") -> Figure:
    """Top-1 accuracy of the model and of unigram frequencies, per training-frequency bucket of the true token
    (``buckets`` from :func:`mlm_course.probes.accuracy_by_frequency`), with 95 % Wilson intervals over its tokens."""
    from mlm_course.statistics import wilson_interval

    x = range(len(buckets))
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for offset, key, name, color in ((-0.2, "model_top1", "model", OKABE_ITO["blue"]),
                                     (0.2, "unigram_top1", "unigram frequencies", OKABE_ITO["orange"])):
        values = [b[key] for b in buckets]
        spans = [wilson_interval(round(b[key] * b["tokens"]), b["tokens"], 0.95) if b["tokens"] else (0.0, 0.0)
                 for b in buckets]
        errors = [[max(0.0, v - low) for v, (low, _) in zip(values, spans, strict=True)],
                  [max(0.0, high - v) for v, (_, high) in zip(values, spans, strict=True)]]
        ax.bar([i + offset for i in x], values, width=0.4, label=name, color=color, yerr=errors, capsize=3)
    ax.set_xticks(list(x), [f"{b['bucket']}\n({b['tokens']:,} tokens)" for b in buckets], fontsize=9)
    ax.set(xlabel="true token's share of all training tokens", ylabel="top-1 accuracy (95 % interval)",
           title=title or "which masked tokens the model gets right", ylim=(0, 1))
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


#: How each run of ``benchmarks/bench_time_to_loss.py`` is drawn: (label, colour, line style); the panel it goes in.
TIME_TO_LOSS_RECIPES = {
    "course": ("(a) the course's recipe", OKABE_ITO["blue"], "-"),
    "transformers_tuned": ("(c) Trainer + BertForMaskedLM, the course's lr and schedule", OKABE_ITO["orange"], "-"),
    "transformers_tuned_lr1e-3": ("(c) at lr 1e-3", OKABE_ITO["orange"], "--"),
    "transformers_in_course_loop": ("(c)'s model and loss in the course's runner", OKABE_ITO["orange"], ":"),
    "transformers_defaults": ("(b) Trainer at its defaults", OKABE_ITO["vermillion"], "-"),
}
TIME_TO_LOSS_ABLATIONS = {
    "course": ("(a) the course's recipe", OKABE_ITO["blue"], "-"),
    "course_full_logits": ("logits at every position", OKABE_ITO["sky blue"], "-"),
    "course_dropout": ("dropout 0.1", OKABE_ITO["bluish green"], "-"),
    "course_no_packing": ("no packing (padded paragraphs)", OKABE_ITO["reddish purple"], "-"),
    "course_short_seq": ("10 % short sequences", "black", "-."),
    "course_fp32": ("fp32 (no bf16 autocast)", "black", ":"),
}


def _time_to_loss_panel(ax, document: dict, recipes: dict, title: str) -> None:
    for name, (label, color, style) in recipes.items():
        run = document["runs"].get(name)
        if run is None or "curve" not in run:
            continue
        points = [p for p in run["curve"] if p["cpu_seconds"] > 0]
        ax.plot([p["cpu_seconds"] for p in points], [p["loss"] for p in points], style, color=color, lw=1.6,
                label=label)
    for target in document["targets"]:
        ax.axhline(target["loss"], color="#777777", ls="--", lw=0.8)
    unigram = document["unigram_baseline"]["loss"]
    ax.axhline(unigram, color="black", lw=1.0)
    ax.annotate(f"unigram frequencies {unigram:.2f}", (0.5, unigram), xycoords=("axes fraction", "data"),
                xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=9)
    ax.set_xscale("log")
    ax.set(xlabel="training CPU-seconds (one thread; log scale)", title=title)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.16), frameon=False)


@localised
def time_to_loss_curves(document: dict) -> Figure:
    """Held-out masked-LM loss against training CPU-seconds (``benchmarks/results/time_to_loss.json``): the
    recipes (a), (b), (c) on the left, (a) with one of its choices undone at a time on the right; the targets
    and the unigram baseline as labelled lines. On the log time axis equal horizontal gaps are equal speed-ups."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.3, 5.6), sharey=True, layout="constrained")
    _time_to_loss_panel(left, document, TIME_TO_LOSS_RECIPES, "the course vs transformers")
    _time_to_loss_panel(right, document, TIME_TO_LOSS_ABLATIONS, "the course's choices, one undone at a time")
    targets = right.secondary_yaxis("right")  # the dashed lines' levels, named where no curve runs
    targets.set_yticks([t["loss"] for t in document["targets"]], [f"target {t['loss']:.2f}" for t in
                                                                  document["targets"]], fontsize=9)
    losses = [p["loss"] for run in document["runs"].values() for p in run.get("curve", []) if p["cpu_seconds"] > 0]
    left.set_ylim(min(losses) - 0.2, max(losses) + 0.1)
    left.set_ylabel("held-out masked-token loss (nats)")
    return fig


#: How each run of ``benchmarks/bench_lunch_break.py`` is drawn: (group, run) → (label, colour, line style).
LUNCH_BREAK_RUNS = {
    ("before", "course"): ("the checkpoint's recipe (its first stage)", OKABE_ITO["blue"], "-"),
    ("before", "lunch"): ("the same, its schedule fitted to 30 minutes", OKABE_ITO["sky blue"], "-"),
    ("transformers", "lunch"): ("the same, fitted: its second run", OKABE_ITO["sky blue"], ":"),
    ("transformers", "transformers_tuned"): ("(c) Trainer + BertForMaskedLM, tuned", OKABE_ITO["orange"], "-"),
    ("transformers", "transformers_defaults"): ("(b) Trainer at its defaults", OKABE_ITO["vermillion"], "--"),
}


@localised
def lunch_break_curves(document: dict) -> Figure:
    """Held-out masked-LM loss against training CPU-minutes (``benchmarks/results/lunch_break.json``): the shipped
    checkpoint's recipe, the same with its schedule fitted to the budget (run twice, once per comparison) and
    transformers' ``Trainer`` (tuned and at its defaults), the runs of each comparison taking turns on one thread;
    the unigram line and the shipped checkpoint's loss drawn and named."""
    fig, ax = plt.subplots(figsize=(8.5, 5.2), layout="constrained")
    for (group, name), (label, color, style) in LUNCH_BREAK_RUNS.items():
        run = document["groups"].get(group, {}).get("runs", {}).get(name)
        if run is None:
            continue
        points = [p for p in run["curve"] if p["cpu_seconds"] > 0]
        ax.plot([p["cpu_seconds"] / 60 for p in points], [p["loss"] for p in points], style, color=color, lw=1.7,
                label=label)
    for level, text in ((document["unigram_baseline"]["loss"], "unigram frequencies {}"),
                        (document["checkpoint_loss"], "the shipped checkpoint {}")):
        ax.axhline(level, color="black" if "unigram" in text else "#777777", lw=1.0,
                   ls="-" if "unigram" in text else "--")
        ax.annotate(text.format(f"{level:.2f}"), (1.0, level), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=9)
    minutes = max(group["runs"]["lunch"]["budget_cpu_seconds"] for group in document["groups"].values()) / 60
    ax.set(xlabel="training CPU-minutes (one thread)", ylabel="held-out masked-token loss (nats)",
           title=f"pretraining the tiny BERT for {minutes:.3g} CPU-minutes", xlim=(0, minutes))
    ax.set_ylim(document["checkpoint_loss"] - 0.3, 7.6)
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    return fig
