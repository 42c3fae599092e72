"""Exercises of notebook 08_ablations: what a mix means per token, predictions per step, static masks, seeds, and
why one evaluation can favour one training mix."""

from __future__ import annotations

import math
import random
import statistics

from mlm_course.exercises import Exercise, Near, multiple_choice, numeric, register


def _close(answer, expected: float, rel: float = 1e-6) -> bool:
    return math.isclose(float(answer), expected, rel_tol=rel, abs_tol=1e-12)


# ---- 08.1: how often the model sees each kind of input ------------------------------------------------------------
_RATE, _MIX = 0.15, (0.8, 0.1, 0.1)  # selection rate; [MASK], random, unchanged-but-predicted among the selected
_SHARES = tuple(_RATE * share for share in _MIX)  # of all maskable tokens


def _grade_81(answer) -> str | None:
    values = [float(x) for x in answer]
    if len(values) != 3:
        return "give three shares: ([MASK], random token, unchanged-but-predicted)."
    if all(_close(v, e) for v, e in zip(values, _SHARES, strict=True)):
        return None
    if all(_close(v, e) for v, e in zip(values, _MIX, strict=True)):
        return "those are shares of the *selected* tokens; multiply by the 15 % that are selected."
    if _close(sum(values), 1.0):
        return "the three shares add up to the selection rate (0.15), not to 1: most tokens are not selected."
    return "share of all tokens = selection rate × share of the mix: 0.15 × (0.8, 0.1, 0.1)."


register(Exercise(
    id="08.1",
    prompt="At rate 15 % and MASK/SAME/RND = 80/10/10, what share of all maskable tokens does the model see as "
           "(a) [MASK], (b) a random token, (c) unchanged but predicted? Give a tuple of three numbers.",
    grade=_grade_81,
    solution=lambda: _SHARES,
    wrong_answers=(_MIX, (_MIX[0] / _RATE, *_MIX[1:]), (*_SHARES[:2], 1 - sum(_SHARES[:2]))),
))

# ---- 08.2: more masking, more predictions ------------------------------------------------------------------------
_ROWS, _MASKABLE = 32, 62  # batch 32 × 64 tokens, [CLS] and [SEP] never predicted
_EXTRA = round(_ROWS * _MASKABLE * (0.40 - 0.15))

numeric(
    "08.2",
    "Batch 32 × 64 tokens ([CLS] … [SEP]). How many more tokens per step (in expectation) does a 40 % "
    "masking rate predict than 15 %?",
    _EXTRA,
    wrong={
        32 * 64 * 0.25: "[CLS] and [SEP] are never selected: 62 maskable tokens per row, not 64.",
        _ROWS * _MASKABLE * 0.40: "that is all the predictions at 40 %; the question asks how many *more* than at 15 %.",
        Near(0.40 / 0.15, rel_tol=1e-3): "a ratio is not a count: the expected extra number of predicted tokens per step.",
    },
    fallback="expected predictions per step = rows × maskable tokens × rate; take the difference of the two rates.",
    whole=False, rel_tol=1e-9, abs_tol=0.5,  # an expectation: within half a token; math.isclose's default rel_tol
)

# ---- 08.3: how often a static mask comes back ------------------------------------------------------------------
_EPOCHS, _COPIES = 30, 5
_REPEATS = _EPOCHS // _COPIES

numeric(
    "08.3",
    "Static masking with 5 masked copies of the corpus (BERT's dupe_factor), 30 epochs of training: how many "
    "times does the model see each sequence with the same mask?",
    _REPEATS,
    wrong={
        _COPIES: "5 is the number of different masks per sequence; how often is each one *seen* over 30 epochs?",
        _EPOCHS: "each epoch uses one of the 5 copies in turn, so a given copy comes back every 5 epochs.",
        1: "that is dynamic masking (a fresh mask each time); static copies are reused.",
    },
    fallback="epochs / copies: epoch e uses copy e mod copies.",
)


# ---- 08.4: is a difference between two variants more than seed noise? ---------------------------------------------
def _paired(a, b) -> float:
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.fmean(differences) / (statistics.stdev(differences) / math.sqrt(len(differences)))


def _cases_84() -> list[tuple[list[float], list[float]]]:
    rng = random.Random(84)
    cases = [([0.71, 0.74, 0.72], [0.69, 0.70, 0.66]), ([5.9, 6.1, 6.0, 6.2], [6.3, 6.25, 6.4, 6.5])]
    for n in (3, 5, 8):
        shared = [rng.gauss(0.7, 0.05) for _ in range(n)]  # what a seed does to both variants alike
        cases.append(([s + rng.gauss(0.02, 0.01) for s in shared], [s + rng.gauss(0.0, 0.01) for s in shared]))
    return cases


def _grade_84(fn) -> str | None:
    for a, b in _cases_84():
        got = float(fn(list(a), list(b)))
        expected = _paired(a, b)
        if math.isclose(got, expected, rel_tol=1e-6):
            continue
        if math.isclose(got, -expected, rel_tol=1e-6):
            return "the sign is reversed: t = mean(a − b) / standard error, a minus b."
        if math.isclose(got, _welch_t(a, b), rel_tol=1e-6):
            return ("that is Welch's t for two independent groups. Seed k of both variants starts from the same "
                    "weights and sees the same data order: take the per-seed differences a[k] − b[k] first.")
        if math.isclose(got, _population_t(a, b), rel_tol=1e-6):
            return "use the sample standard deviation of the differences (divide by n − 1, not n)."
        if math.isclose(got, _no_sqrt_t(a, b), rel_tol=1e-6):
            return "the standard error of a mean is s / √n: divide the differences' standard deviation by √n."
        return f"for a={a} and b={b} the expected t is {expected:.4f}; got {got:.4f}."
    return None


def _solution_84():
    def paired_t(a, b):
        differences = [x - y for x, y in zip(a, b, strict=True)]
        n = len(differences)
        mean = sum(differences) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
        return mean / (sd / math.sqrt(n))

    return paired_t


def _welch_t(a, b):
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(
        statistics.variance(a) / len(a) + statistics.variance(b) / len(b))


def _population_t(a, b):
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.fmean(differences) / (statistics.pstdev(differences) / math.sqrt(len(differences)))


def _reversed_t(a, b):
    return -_paired(a, b)


def _no_sqrt_t(a, b):
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.fmean(differences) / statistics.stdev(differences)


register(Exercise(
    id="08.4",
    prompt="Write paired_t(a, b) -> float: the paired t statistic of two lists of per-seed results, a[k] and b[k] "
           "from the same seed (mean of the differences a[k] − b[k] over its standard error: their sample standard "
           "deviation / √n), without scipy.",
    grade=_grade_84,
    solution=_solution_84,
    wrong_answers=(_welch_t, _population_t, _reversed_t, _no_sqrt_t),
))

# ---- 08.5: explain why the frozen 80/10/10 evaluation favours mixes with SAME -------------------------------------
multiple_choice(
    "08.5",
    "On the frozen 15 % 80/10/10 held-out masks, the mixes that keep some tokens unchanged (SAME > 0) score clearly "
    "lower losses than those that do not (6.22 for 80/10/10 against 6.56 for 100/0/0, 95 % intervals over seeds "
    "of ±0.02 nats at most). Why does this not show, by itself, that SAME gives better representations?",
    {
        "a": "Because three seeds are too few to tell a difference of 0.34 nats from noise, however small the spread "
             "between them looks; it takes at least ten seeds per mix.",
        "b": "Because every run was scored on its own held-out positions, drawn with its own seed, so the losses of "
             "two mixes answer different questions and cannot be compared.",
        "c": "Because mixes without SAME predict fewer tokens per step, only those shown as [MASK] or a random "
             "token, so they got less training signal and lag behind.",
        "d": "Because 10 % of the evaluation positions show the true token, which only models trained with SAME "
             "learned to copy; compare the mixes at the [MASK] positions.",
    },
    "d",
    {
        "a": "the 95 % intervals over seeds are ±0.02 nats at most and the paired t-test over the seeds gives p 0.001 "
             "(section 6): the difference is real. The question is what it measures.",
        "b": "the evaluation masks are frozen (seed 1234): every run is scored on the same positions with the same "
             "replacements (section 3).",
        "c": "every mix selects the same 15 % of the tokens and predicts all of them; the mix only decides what the "
             "selected positions show.",
    },
)
