"""Exercises of notebook 06_pretraining: parameter shares, the training step written by the learner (checked
against :func:`mlm_course.steps.training_step`), the schedule, the baseline, sparse logits, and why the training loss
ends below the held-out loss."""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from transformers import BertConfig

from mlm_course.bert import BertMLM
from mlm_course.exercises import Between, Exercise, Near, multiple_choice, numeric, register
from mlm_course.exercises.step_check import StepExercise, grade_step, slipped_step
from mlm_course.masking import MaskSpec
from mlm_course.models import CONFIGS
from mlm_course.objective import masked_lm_loss
from mlm_course.pretraining import mask_blocks, pack_blocks
from mlm_course.steps import linear_schedule
from mlm_course.tokenization import course_tokenizer

COURSE_VOCAB = 8192
TINY_HIDDEN = CONFIGS["tiny"]["hidden_size"]

# ---- 06.1: where the parameters sit, with another vocabulary ----------------------------------------------------
# build_model("tiny", tok, max_positions=128): embeddings = words + 128 positions + 2 token types + LayerNorm;
# the head = a 128 × 128 transform + LayerNorm + one output bias per vocabulary entry (its matrix is the tied table)
_NOT_WORDS = 128 * TINY_HIDDEN + 2 * TINY_HIDDEN + 2 * TINY_HIDDEN  # positions, token types, LayerNorm
_ENCODER, _HEAD_FIXED = 396_544, TINY_HIDDEN * TINY_HIDDEN + TINY_HIDDEN + 2 * TINY_HIDDEN


def _word_share(vocab: int, *, bias_grows: bool = True, tied: bool = True) -> float:
    words = vocab * TINY_HIDDEN
    head = _HEAD_FIXED + (vocab if bias_grows else COURSE_VOCAB) + (0 if tied else words)
    return words / (words + _NOT_WORDS + _ENCODER + head)


_BERT_VOCAB = 30_522

numeric(
    "06.1",
    "In §2 the word embeddings are 71 % of the tiny model. Built the same way (hidden 128, 2 layers, "
    "128 positions, output layer tied to the embeddings) but for bert-base-uncased's 30,522-entry vocabulary, "
    "what share of all its parameters would the word-embedding table be? (a float between 0 and 1)",
    _word_share(_BERT_VOCAB),
    wrong={
        Between(1, math.inf):
            "give the share of all parameters, a number between 0 and 1 (e.g. 0.71 for the course vocabulary).",
        Near(_word_share(COURSE_VOCAB), abs_tol=5e-3):
            "that is the share with the course's 8,192 entries; redo it with bert-base-uncased's 30,522.",
        _word_share(_BERT_VOCAB, bias_grows=False):
            "close: the output layer's bias also has one entry per vocabulary word, so the head grows too.",
        _word_share(_BERT_VOCAB, tied=False):
            "the output matrix is tied to the word embeddings (the same tensor): count it once.",
    },
    fallback="only the vocabulary-sized parts change: the word table (vocabulary × 128) and the output bias "
             "(one per word); positions, token types, LayerNorm and the encoder stay as printed in §2.",
    rel_tol=1e-9, abs_tol=5e-4,  # math.isclose's default rel_tol
)

# ---- 06.2: write the pretraining step ---------------------------------------------------------------------------
_TEXT_62 = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
            "want of a wife. However little known the feelings or views of such a man may be on his first entering "
            "a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
            "considered the rightful property of some one or other of their daughters.")


def _setup_62() -> tuple[BertMLM, dict[str, torch.Tensor]]:
    """A one-layer BertMLM on the course vocabulary, dropout 0.1, and one masked batch of five 16-token blocks."""
    tok = course_tokenizer()
    batch = mask_blocks(pack_blocks([_TEXT_62], tok, seq_len=16), tok, MaskSpec(), torch.Generator().manual_seed(62))
    config = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, pad_token_id=tok.pad_token_id,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return BertMLM(config, seed=62), batch


def _every_position_against_input_ids(model, batch):
    logits = model(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(logits.flatten(0, 1), batch["input_ids"].flatten())


_STEP_62 = StepExercise(
    build=_setup_62,
    loss_fn=masked_lm_loss,
    loss_name="objective.masked_lm_loss",
    loss_slips=((_every_position_against_input_ids,
                 "the loss was taken at every position against input_ids (notebook 05's labels=input_ids bug): the "
                 "model is taught to copy its input, [MASK] included. Score only the masked positions against their "
                 "labels: objective.masked_lm_loss(model, batch)."),),
    fall=2.0,
)


def _solution_62():
    from mlm_course.objective import masked_lm_loss

    def my_step(model, batch, optimizer, scheduler):
        model.train()  # dropout on: the model may come from an evaluation, in eval mode
        loss = masked_lm_loss(model, batch)  # mean −log p(true token) over the masked positions
        loss.backward()  # d(loss)/d(weight), added into every weight's .grad
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # scale the gradient down to norm ≤ 1
        optimizer.step()  # AdamW's update, with the clipped gradients
        scheduler.step()  # the learning rate of the next step (warm-up, then decay)
        optimizer.zero_grad()  # or the next step's gradients would add to these
        return loss

    return my_step


register(Exercise(
    id="06.2",
    prompt=("Write my_step(model, batch, optimizer, scheduler) -> loss: one masked-LM training step of the course's "
            "BertMLM on a batch from pretraining.mask_blocks (input_ids, attention_mask, labels, masked_positions): "
            "the loss objective.masked_lm_loss(model, batch), backward, clip the gradient norm to 1.0, the "
            "optimiser's step, the scheduler's step, zero the gradients; return the loss. Checked against "
            "steps.training_step on a copy of the same model (which comes in eval mode), with the same dropout "
            "masks: the same loss, the same clipped gradients and learning rate for 3 steps, and a loss that "
            "falls over 20."),
    grade=partial(grade_step, _STEP_62),
    solution=_solution_62,
    wrong_answers=(
        slipped_step(masked_lm_loss, "my_step_without_zero_grad", zero_grad=False),
        slipped_step(masked_lm_loss, "my_step_without_clipping", clip="none"),
        slipped_step(masked_lm_loss, "my_step_clipping_after_the_update", clip="after"),
        slipped_step(masked_lm_loss, "my_step_without_scheduler_step", schedule="none"),
        slipped_step(masked_lm_loss, "my_step_scheduler_first", schedule="before"),
        slipped_step(masked_lm_loss, "my_step_without_train_mode", train=False),
        slipped_step(_every_position_against_input_ids, "my_step_with_labels_input_ids"),
    ),
))

# ---- 06.3: the learning-rate schedule ---------------------------------------------------------------------------
_LR = 3e-3 * linear_schedule(700, 14_000)(7_350)

numeric(
    "06.3",
    "lr 3e-3, 700 warm-up steps, 14,000 steps, linear decay to 0: the learning rate at step 7,350?",
    _LR,
    wrong={
        3e-3: "after the warm-up the rate decays linearly to 0 at the last step: it is no longer the peak.",
        3e-3 * (1 - 7_350 / 14_000):
            "the decay starts after the 700 warm-up steps: factor = (14,000 − 7,350) / (14,000 − 700).",
    },
    fallback="factor = (total − step) / (total − warm-up) after the warm-up; multiply the peak lr by it.",
    rel_tol=1e-6, abs_tol=0.0,
)

# ---- 06.4: the baseline is an entropy ---------------------------------------------------------------------------
_PROBS = (0.5, 0.25, 0.25)
_ENTROPY = -sum(p * math.log(p) for p in _PROBS)

numeric(
    "06.4",
    "Loss (nats) of a unigram predictor that knows the probabilities [0.5, 0.25, 0.25] exactly?",
    _ENTROPY,
    wrong={
        1.5: "1.5 is the entropy in bits (log2); the loss of the notebooks is in nats (natural log).",
        math.log(3): "ln 3 is the loss of a uniform guess; the predictor knows the probabilities: −Σ p ln p.",
    },
    fallback="the expected loss is −Σ p ln p over the tokens (the entropy of the distribution), in nats.",
    rel_tol=1e-4, abs_tol=0.0,
)

# ---- 06.5: what sparse logits save ------------------------------------------------------------------------------
_POSITIONS = 32 * 128
_SAVED = (_POSITIONS - round(_POSITIONS * 0.15)) * COURSE_VOCAB

numeric(
    "06.5",
    "Batch 32 × 128, 15 % masked, vocabulary 8,192: how many fewer logits does a sparse step compute?",
    _SAVED,
    wrong={
        _POSITIONS * COURSE_VOCAB:
            "that is what the full version computes; subtract what the sparse version still computes.",
        round(_POSITIONS * 0.15) * COURSE_VOCAB:
            "that is what the sparse version computes (the masked positions); the question asks for the saving.",
    },
    fallback="(all positions − masked positions) × vocabulary size, with 15 % of 32 × 128 positions masked.",
)

# ---- 06.6: explain why the training loss ends below the held-out loss ----------------------------------------------
multiple_choice(
    "06.6",
    "At the end of the shipped checkpoint's curve (§6) its training loss is about 0.6 nats below its held-out loss, "
    "while the held-out loss is still falling. Which explanation fits the measurements of §6?",
    {
        "a": "The held-out chapters and articles use rarer words than the training text, so they are simply harder "
             "to predict, for any model and at every step of the run.",
        "b": "Training batches get fresh masks every step, and fresh masks are easier to fill in than the frozen "
             "held-out masks, which were drawn once, with a fixed seed.",
        "c": "The training loss is an average over the steps of each log interval, so it lags behind the weights and "
             "reads lower than the held-out loss, which scores the final weights.",
        "d": "It has seen each training block about 136 times and knows that text better than new text; with the "
             "held-out loss still falling, this is not yet harmful overfitting.",
    },
    "d",
    {
        "a": "the unigram baseline measures exactly that, and it differs by only about 0.1 nats between the training "
             "sample and the held-out set; the rest of the gap is the model's.",
        "b": "fresh and frozen masks are drawn by the same rule (15 %, 80/10/10); frozen only means the same "
             "positions at every evaluation. The gap is there when the final weights score a training sample with "
             "frozen masks too.",
        "c": "a lag makes the training loss *higher* while the loss is falling, not lower; and the gap is also there "
             "when the final weights score a training sample with frozen masks.",
    },
)
