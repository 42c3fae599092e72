"""Exercises of notebook 03_masking: the original count, the replacement mix, labels, fixed-count and whole-word
selection without a loop over tokens."""

from __future__ import annotations

import math

import torch

from mlm_course.exercises import Exercise, multiple_choice, numeric, register

# ---- 03.1: the original BERT count ------------------------------------------------------------------------------
_LENGTHS_31 = (3, 17, 90, 150)  # none of them printed in the notebook
_COUNTS_31 = [1, 3, 14, 23]  # max(1, round_py2(0.15 * n)): 0.45, 2.55, 13.5, 22.5


def _grade_31(answer) -> str | None:
    answer = [int(a) for a in answer]
    if answer == _COUNTS_31:
        return None
    if len(answer) != len(_LENGTHS_31):
        return f"give one count per length {_LENGTHS_31}: {len(_LENGTHS_31)} numbers."
    if answer[0] == 0:
        return "the original never predicts 0 tokens: num_to_predict = min(max_pred, max(1, round(0.15 * n)))."
    if answer[1] == 2 or answer[2] == 13:
        return "0.15 × 17 = 2.55 and 0.15 × 90 = 13.5: round them, do not truncate with int() (int(2.55) = 2)."
    if answer[3] == 22:
        return ("0.15 × 150 = 22.5 is an exact half: the original ran on Python 2, whose round() sends halves away "
                "from zero (23); Python 3's round() sends them to the even neighbour (22). (13.5 gives 14 either "
                "way: 14 is even.)")
    return "compute max(1, round_half_up(0.15 * n)) for each n, n counting [CLS] and [SEP]."


register(Exercise(
    id="03.1",
    prompt=("How many tokens does the original BERT (15 %, no cap) predict in sequences of n = 3, 17, 90, 150 tokens "
            "(n includes [CLS] and [SEP])? Give a list of four integers."),
    grade=_grade_31,
    solution=lambda: list(_COUNTS_31),
    wrong_answers=([0, 2, 13, 22], [1, 2, 13, 22], [1, 3, 14, 22], [1, 3, 14]),
))

# ---- 03.2: the conditional probability of the second coin -------------------------------------------------------
numeric(
    "03.2",
    "Code draws `u1 < 0.7` → [MASK]; otherwise `u2 < q` → random, else unchanged. Which q gives the mix "
    "70 % [MASK] / 20 % random / 10 % unchanged?",
    2 / 3,
    wrong={
        0.2: ("0.2 is the overall share, but the second coin only sees the 30 % that were not [MASK]ed: "
              "q = 0.2 / 0.3. With q = 0.2 you would get 70 / 6 / 24."),
        (0.1, 1 / 3): "q is P(random | not [MASK]) — random is the 0.2 share out of the 0.3 left, not the 'unchanged' share.",
    },
    fallback="after the [MASK] coin 30 % remain; what fraction of those 30 % must become random to give 20 % overall?",
    rel_tol=1e-9, abs_tol=1e-3,  # math.isclose's default rel_tol
)

# ---- 03.3: labels -----------------------------------------------------------------------------------------------
# [CLS] the cat sat on the mat . [SEP]: position 2 (cat) → [MASK], 5 (the) → the random token "dog" (3899),
# 6 (mat) selected but left unchanged. (Not the sentence of the notebook's "Mistake 4" cell, whose labels it prints.)
_ORIGINAL_33 = [101, 1996, 4937, 2938, 2006, 1996, 13523, 1012, 102]
_CORRUPTED_33 = [101, 1996, 103, 2938, 2006, 3899, 13523, 1012, 102]
_LABELS_33 = [-100, -100, 4937, -100, -100, 1996, 13523, -100, -100]


def _grade_33(answer) -> str | None:
    answer = [int(a) for a in answer]
    if answer == _LABELS_33:
        return None
    if len(answer) != len(_ORIGINAL_33):
        return f"give one label per input position ({len(_ORIGINAL_33)})."
    if 0 in answer and -100 not in answer:
        return "use -100, not 0, for ignored positions: 0 is the id of [PAD], a real class for the loss."
    if answer[2] == 103 or answer[5] == 3899:
        return ("a label is the *original* id (4937 at position 2, 1996 at position 5), not what the model is shown "
                "([MASK] = 103, the random 3899): build the labels from the ids before corrupting them.")
    if answer == _ORIGINAL_33:
        return "unselected positions must be -100 (ignored by the loss), otherwise the model is scored on copying."
    if answer[5] == -100 or answer[6] == -100:
        return ("positions 5 and 6 were selected too: a random or unchanged position is predicted like a [MASK]ed "
                "one, so it keeps its original id as the label.")
    return "labels: the original id at each selected position (2, 5 and 6), -100 everywhere else."


register(Exercise(
    id="03.3",
    prompt=(f"input_ids {_ORIGINAL_33} ([CLS] the cat sat on the mat . [SEP]). Positions 2, 5 and 6 are selected: "
            f"2 becomes [MASK] (103), 5 the random token 'dog' (3899), 6 is left unchanged, so the model is shown "
            f"{_CORRUPTED_33}. Give the labels list."),
    grade=_grade_33,
    solution=lambda: list(_LABELS_33),
    wrong_answers=(
        [-100, -100, 103, -100, -100, 3899, 13523, -100, -100],
        [-100, -100, 4937, -100, -100, 3899, 13523, -100, -100],
        [-100, -100, 4937, -100, -100, -100, -100, -100, -100],
        list(_ORIGINAL_33),
        [0, 0, 4937, 0, 0, 1996, 13523, 0, 0],
    ),
))

# ---- 03.4: fixed-count selection without a loop -----------------------------------------------------------------
_MASKABLE_34 = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 0], [0, 1, 0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0, 0, 0]], dtype=torch.bool)
_K_34 = torch.tensor([2, 3, 1])


def _grade_34(fn) -> str | None:
    reps = 4000
    maskable = _MASKABLE_34.repeat(reps, 1)
    k = _K_34.repeat(reps)
    got = torch.as_tensor(fn(maskable.clone(), k.clone(), torch.Generator().manual_seed(0))).bool()
    if got.shape != maskable.shape:
        return f"return a bool tensor shaped like maskable {tuple(maskable.shape)}, got {tuple(got.shape)}."
    if (got & ~maskable).any():
        return "it selected a non-maskable position ([CLS]/[SEP]/[PAD]): give those a score that always loses (-inf)."
    if not torch.equal(got.sum(1), k):
        return ("each row must hold exactly k[i] selections; a Bernoulli draw with rate k/n only gets it right on "
                "average. Rank random scores per row (topk / argsort) and keep the first k[i].")
    counts = got.view(reps, 3, -1).sum(0).float()  # per layout, per position
    for row in range(3):
        c = counts[row][_MASKABLE_34[row]]
        expected = c.sum() / len(c)
        chi2 = float(((c - expected) ** 2 / expected).sum())
        if chi2 > 30:  # df ≤ 5: p < 1e-5
            return ("the counts are right but the choice is not uniform (e.g. always the leftmost maskable tokens): "
                    "rank *random* scores, not positions.")
    again = torch.as_tensor(fn(maskable.clone(), k.clone(), torch.Generator().manual_seed(0))).bool()
    if not torch.equal(got, again):
        return "use the generator you are given for every random draw, so the same seed gives the same selection."
    return None


def _solution_34():
    def select_fixed(maskable, k, generator):
        scores = torch.rand(maskable.shape, generator=generator).masked_fill(~maskable, -1.0)
        top = scores.topk(int(k.max()), dim=1).indices
        return torch.zeros_like(maskable).scatter(1, top, torch.arange(top.shape[1])[None, :] < k[:, None])

    return select_fixed


def _leftmost(maskable, k, generator):
    rank = torch.cumsum(maskable.long(), 1)
    return maskable & (rank <= k[:, None])


def _bernoulli_rate(maskable, k, generator):
    rate = (k / maskable.sum(1))[:, None]
    return maskable & (torch.rand(maskable.shape, generator=generator) < rate)


def _ignores_specials(maskable, k, generator):
    top = torch.rand(maskable.shape, generator=generator).topk(int(k.max()), dim=1).indices
    return torch.zeros_like(maskable).scatter(1, top, torch.arange(top.shape[1])[None, :] < k[:, None])


register(Exercise(
    id="03.4",
    prompt=("Write select_fixed(maskable, k, generator) -> bool tensor: exactly k[i] positions of row i, uniformly "
            "among its maskable ones, without a Python loop over tokens."),
    grade=_grade_34,
    solution=_solution_34,
    wrong_answers=(_leftmost, _bernoulli_rate, _ignores_specials),
))

# ---- 03.5: whole-word Bernoulli -----------------------------------------------------------------------------------
# word ids per token, -1 = special: words of 1, 3, 2 and 1 pieces
_WORDS_35 = torch.tensor([[-1, 0, 1, 1, 1, 2, 2, 3, -1]])


def _grade_35(fn) -> str | None:
    reps, mask_rate = 20_000, 0.3
    word_ids = _WORDS_35.repeat(reps, 1)
    got = torch.as_tensor(fn(word_ids.clone(), mask_rate, torch.Generator().manual_seed(0))).bool()
    if got.shape != word_ids.shape:
        return f"return a bool tensor shaped like word_ids {tuple(word_ids.shape)}."
    if (got & (word_ids < 0)).any():
        return "a special token (word id -1) was selected."
    for w in range(4):
        members = got[:, (word_ids[0] == w)]
        if not (members.all(1) | ~members.any(1)).all():
            return f"word {w} was split: decide once per word and give the decision to all its pieces."
    share = got[:, (word_ids[0] == 1)][:, 0].float().mean().item()  # the 3-piece word
    single = got[:, (word_ids[0] == 0)][:, 0].float().mean().item()
    bound = 3.3 * math.sqrt(mask_rate * (1 - mask_rate) / reps)
    if abs(single - mask_rate) > bound:
        return f"a one-piece word should be selected with probability {mask_rate}, got {single:.3f}."
    if abs(share - mask_rate) > bound:
        return (f"the three-piece word was selected {share:.3f} of the time, not {mask_rate}: selecting a word when *any* "
                "piece wins its coin favours long words (1 − 0.7³ ≈ 0.66). Flip one coin per word.")
    return None


def _solution_35():
    def whole_word(word_ids, mask_rate, generator):
        valid = word_ids >= 0
        first = valid & (word_ids != torch.nn.functional.pad(word_ids, (1, 0), value=-1)[:, :-1])
        coin = (torch.rand(word_ids.shape, generator=generator) < mask_rate) & first
        word_no = torch.cumsum(first.flatten(), 0).reshape(word_ids.shape) - 1
        return valid & coin[first][word_no.clamp(min=0)]

    return whole_word


def _per_token(word_ids, mask_rate, generator):
    return (word_ids >= 0) & (torch.rand(word_ids.shape, generator=generator) < mask_rate)


def _any_piece(word_ids, mask_rate, generator):
    coin = (word_ids >= 0) & (torch.rand(word_ids.shape, generator=generator) < mask_rate)
    same = (word_ids[:, :, None] == word_ids[:, None, :]) & (word_ids[:, None, :] >= 0)
    return (word_ids >= 0) & (same & coin[:, None, :]).any(-1)


def _first_piece_only(word_ids, mask_rate, generator):
    valid = word_ids >= 0
    first = valid & (word_ids != torch.nn.functional.pad(word_ids, (1, 0), value=-1)[:, :-1])
    return first & (torch.rand(word_ids.shape, generator=generator) < mask_rate)


register(Exercise(
    id="03.5",
    prompt=("Write whole_word(word_ids, mask_rate, generator) -> bool tensor: each word (same id, -1 = special) "
            "selected with probability mask_rate, all its pieces together, without a Python loop over tokens."),
    grade=_grade_35,
    solution=_solution_35,
    wrong_answers=(_per_token, _any_piece, _first_piece_only),
))

# ---- 03.6: explain why (transfer): 100 % [MASK] and frozen features --------------------------------------------
multiple_choice(
    "03.6",
    "A team pretrains BERT with 100 % [MASK] (no random, no unchanged tokens). They then freeze it and train only a "
    "linear tagger on its token vectors to find names in sentences, which contain no [MASK]. Compared with the same "
    "BERT pretrained with 80 / 10 / 10, what do you expect, and why?",
    {
        "a": "Somewhat worse tags: only [MASK] inputs were ever scored, so nothing made a visible token's vector "
             "describe its own token, and the tagger reads only visible tokens.",
        "b": "The tagger fails completely: a model that only ever saw [MASK] in pretraining cannot read a sentence "
             "without one, so its vectors for a plain sentence are noise.",
        "c": "No difference: the tagger's sentences contain no [MASK], so what the model learnt at [MASK] positions "
             "plays no part, and on plain sentences both models' vectors are alike.",
        "d": "Better tags: 100 % [MASK] is a harder task than 80 / 10 / 10, with a higher loss to push down, so it "
             "builds stronger features, and the frozen tagger profits.",
    },
    "a",
    {
        "b": "in pretraining 85 % of the tokens were visible in every sentence: the model reads visible tokens all "
             "the time. The question is what their vectors had to encode, and the effect is a small loss, not a "
             "collapse.",
        "c": "what the model learnt is exactly the problem: its vectors at visible tokens were shaped only as "
             "context for [MASK] positions. Which positions did the loss ever score?",
        "d": "a larger loss does not mean better features: 100 % [MASK] removes the only reason to model a visible "
             "token well. In Table 8 it beats 80 / 10 / 10 in no column by more than 0.1.",
    },
)
