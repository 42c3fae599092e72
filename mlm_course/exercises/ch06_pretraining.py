"""Exercises of notebook 06_pretraining: parameter counts, tokens seen, the schedule, the baseline, sparse logits."""

from __future__ import annotations

import math

from mlm_course.exercises import Exercise, register
from mlm_course.models import CONFIGS
from mlm_course.training import linear_schedule

COURSE_VOCAB = 8192
TINY_HIDDEN = CONFIGS["tiny"]["hidden_size"]


def _close(answer, expected: float, rel: float = 1e-6) -> bool:
    return math.isclose(float(answer), expected, rel_tol=rel)


# ---- 06.1: the word-embedding table -----------------------------------------------------------------------------
_EMBED = COURSE_VOCAB * TINY_HIDDEN


def _grade_51(answer) -> str | None:
    value = int(answer)
    if value == _EMBED:
        return None
    if value == 2 * _EMBED:
        return "the output layer shares (ties) its weights with the input embeddings: count the table once."
    if value == 30522 * TINY_HIDDEN:
        return "the course model uses the course tokenizer: 8,192 entries, not bert-base-uncased's 30,522."
    if value > _EMBED:
        return "only the word-embedding table: vocabulary size × hidden size (no positions, token types or LayerNorm)."
    return "vocabulary size × hidden size: len(tok) rows of model.config.hidden_size numbers."


register(Exercise(
    id="06.1",
    prompt="How many parameters does the word-embedding table of build_model('tiny', course tokenizer) have?",
    grade=_grade_51,
    solution=lambda: _EMBED,
    wrong_answers=(2 * _EMBED, 30522 * TINY_HIDDEN, _EMBED + 512 * TINY_HIDDEN + 2 * TINY_HIDDEN),
))

# ---- 06.2: tokens seen -------------------------------------------------------------------------------------------
_TOKENS = 14_000 * 32 * 128


def _grade_52(answer) -> str | None:
    value = int(answer)
    if value == _TOKENS:
        return None
    if value == 14_000 * 32:
        return "that is the number of sequences; each has seq_len = 128 tokens."
    if value == round(_TOKENS * 0.15):
        return "that counts the *predicted* (masked) tokens; the model sees every token of every sequence."
    return "steps × batch size × sequence length."


register(Exercise(
    id="06.2",
    prompt="14,000 steps, batch 32, seq_len 128: how many tokens does the run see?",
    grade=_grade_52,
    solution=lambda: _TOKENS,
    wrong_answers=(14_000 * 32, round(_TOKENS * 0.15), 14_000 * 128),
))

# ---- 06.3: the learning-rate schedule ---------------------------------------------------------------------------
_LR = 3e-3 * linear_schedule(700, 14_000)(7_350)


def _grade_53(answer) -> str | None:
    if _close(answer, _LR):
        return None
    if _close(answer, 3e-3):
        return "after the warm-up the rate decays linearly to 0 at the last step: it is no longer the peak."
    if _close(answer, 3e-3 * (1 - 7_350 / 14_000)):
        return "the decay starts after the 700 warm-up steps: factor = (14,000 − 7,350) / (14,000 − 700)."
    return "factor = (total − step) / (total − warm-up) after the warm-up; multiply the peak lr by it."


register(Exercise(
    id="06.3",
    prompt="lr 3e-3, 700 warm-up steps, 14,000 steps, linear decay to 0: the learning rate at step 7,350?",
    grade=_grade_53,
    solution=lambda: _LR,
    wrong_answers=(3e-3, 3e-3 * (1 - 7_350 / 14_000), 1e-3),
))

# ---- 06.4: the baseline is an entropy ---------------------------------------------------------------------------
_PROBS = (0.5, 0.25, 0.25)
_ENTROPY = -sum(p * math.log(p) for p in _PROBS)


def _grade_54(answer) -> str | None:
    if _close(answer, _ENTROPY, rel=1e-4):
        return None
    if _close(answer, 1.5, rel=1e-4):
        return "1.5 is the entropy in bits (log2); the loss of the notebooks is in nats (natural log)."
    if _close(answer, math.log(3), rel=1e-4):
        return "ln 3 is the loss of a uniform guess; the predictor knows the probabilities: −Σ p ln p."
    return "the expected loss is −Σ p ln p over the tokens (the entropy of the distribution), in nats."


register(Exercise(
    id="06.4",
    prompt="Loss (nats) of a unigram predictor that knows the probabilities [0.5, 0.25, 0.25] exactly?",
    grade=_grade_54,
    solution=lambda: _ENTROPY,
    wrong_answers=(1.5, math.log(3), 0.5),
))

# ---- 06.5: what sparse logits save ------------------------------------------------------------------------------
_POSITIONS = 32 * 128
_SAVED = (_POSITIONS - round(_POSITIONS * 0.15)) * COURSE_VOCAB


def _grade_55(answer) -> str | None:
    value = int(answer)
    if value == _SAVED:
        return None
    if value == _POSITIONS * COURSE_VOCAB:
        return "that is what the full version computes; subtract what the sparse version still computes."
    if value == round(_POSITIONS * 0.15) * COURSE_VOCAB:
        return "that is what the sparse version computes (the masked positions); the question asks for the saving."
    return "(all positions − masked positions) × vocabulary size, with 15 % of 32 × 128 positions masked."


register(Exercise(
    id="06.5",
    prompt="Batch 32 × 128, 15 % masked, vocabulary 8,192: how many fewer logits does a sparse step compute?",
    grade=_grade_55,
    solution=lambda: _SAVED,
    wrong_answers=(_POSITIONS * COURSE_VOCAB, round(_POSITIONS * 0.15) * COURSE_VOCAB, _POSITIONS - 614),
))
