"""Notebook 05's experiment: the labels = input_ids bug, the course's loop with another batch maker, and the
held-out split by masking action, against pretraining's own functions and torch."""

import math

import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from mlm_course import corpus, masking, models, objective, objective_bug, pretraining
from mlm_course.train import TrainConfig, train


@pytest.fixture
def small_model(small_bert):
    return small_bert().eval()


def _heldout_blocks(tok, seq_len, count, max_chars=40_000):
    return pretraining.pack_blocks([corpus.pretraining_text("heldout", max_chars=max_chars)], tok, seq_len)[:count]


# ---- the labels = input_ids bug ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [masking.MaskSpec(),
                                  masking.MaskSpec(mask_rate=0.5, mask_mix=(0.5, 0.25, 0.25), mask_scheme="fixed")])
def test_buggy_batch_has_the_corrupted_ids_as_labels(course_tok, spec):
    blocks = _heldout_blocks(course_tok, 32, 4, max_chars=20_000)
    before = blocks.clone()
    good = pretraining.mask_blocks(blocks, course_tok, spec, torch.Generator().manual_seed(5))
    bad = objective_bug.buggy_mask_blocks(blocks, course_tok, spec, torch.Generator().manual_seed(5))
    assert torch.equal(blocks, before)  # the caller's blocks are not modified
    assert torch.equal(bad["input_ids"], good["input_ids"])  # the same corruption
    assert torch.equal(bad["attention_mask"], good["attention_mask"])
    assert bad["labels"] is bad["input_ids"]  # one tensor: the labels *are* the corrupted input
    assert (bad["labels"] != -100).all()  # every position, [CLS] and [SEP] included, is in the loss
    unselected = good["labels"] == -100
    assert torch.equal(bad["labels"][unselected], blocks[unselected])  # copy the input where nothing was masked
    masked = good["input_ids"] == course_tok.mask_token_id
    assert masked.any() and (bad["labels"][masked] == course_tok.mask_token_id).all()


def test_evaluate_by_action_groups_positions_by_mask_tokens_actions(course_tok, small_model):
    """The action at each position is read off the batch (what the input shows there): mask_tokens' own actions,
    except that a random draw of the original token is indistinguishable from, and counted as, unchanged."""
    blocks = _heldout_blocks(course_tok, 64, 16)
    mb = masking.mask_tokens(blocks, masking.MaskSpec(), masking.TokenIds.of(course_tok),
                             generator=torch.Generator().manual_seed(0))
    batch = mb.as_dict()
    first_random = (mb.action == masking.RANDOM).nonzero()[0]
    batch["input_ids"] = mb.input_ids.clone()
    batch["input_ids"][tuple(first_random)] = blocks[tuple(first_random)]  # a random draw of the original token
    same_draw = (mb.action == masking.RANDOM) & (batch["input_ids"] == blocks)
    assert int(same_draw.sum()) >= 1
    got = objective_bug.evaluate_by_action(small_model, [batch], course_tok.mask_token_id)
    with torch.no_grad():
        log_probs = small_model(batch["input_ids"], batch["attention_mask"]).double().log_softmax(-1)
    nll = -log_probs.gather(-1, blocks[..., None]).squeeze(-1)  # per position, against the true token
    expected = {"[MASK]": mb.action == masking.MASKED, "random token": (mb.action == masking.RANDOM) & ~same_draw,
                "unchanged": (mb.action == masking.KEPT) | same_draw}
    for name, where in expected.items():
        assert got[name]["tokens"] == int(where.sum()) > 0, name
        assert math.isclose(got[name]["loss"], float(nll[where].mean()), abs_tol=1e-5), name


def test_evaluate_by_action_matches_evaluate_masked_lm(course_tok, small_model):
    blocks = _heldout_blocks(course_tok, 32, 16)
    batches = pretraining.frozen_eval_batches(blocks, course_tok, pretraining.MaskSpec(), batch_size=8)
    ref = pretraining.evaluate_masked_lm(small_model, batches)
    got = objective_bug.evaluate_by_action(small_model, batches, course_tok.mask_token_id)
    assert math.isclose(got["all"]["loss"], ref["loss"], abs_tol=1e-5)
    assert math.isclose(got["all"]["top1"], ref["top1"], abs_tol=1e-9)
    assert got["all"]["tokens"] == ref["tokens"] == sum(got[a]["tokens"] for a in masking.ACTION_NAMES[1:])
    assert got["[MASK]"]["mask"] == got["[MASK]"]["copy"]  # at a [MASK] position, copying = predicting [MASK]
    # the 95 % t-interval of the mean loss over the per-token losses, from F.cross_entropy
    with torch.no_grad():
        logits, labels = zip(*(objective.masked_lm_outputs(small_model, b) for b in batches), strict=True)
    per_token = F.cross_entropy(torch.cat(logits).double(), torch.cat(labels), reduction="none").numpy()
    low, high = stats.t.interval(0.95, len(per_token) - 1, loc=per_token.mean(), scale=stats.sem(per_token))
    assert math.isclose(got["all"]["loss_ci95"], (high - low) / 2, rel_tol=1e-4)
    assert got["unchanged"]["loss_ci95"] > got["all"]["loss_ci95"]  # fewer tokens, wider interval


def test_evaluate_by_action_restores_training_mode_when_the_forward_pass_fails(small_bert, course_tok, fail_forward):
    """A forward pass that raises (out of memory, say) must not leave a training model in eval mode."""
    batch = pretraining.mask_blocks(torch.tensor([course_tok("a short one.")["input_ids"]]), course_tok,
                                    pretraining.MaskSpec(mask_rate=0.5), torch.Generator().manual_seed(0))
    model = small_bert(0, 64).train()
    seen = fail_forward(model)
    with pytest.raises(RuntimeError, match="simulated"):
        objective_bug.evaluate_by_action(model, [batch], course_tok.mask_token_id)
    assert seen == [False]  # it scored in eval mode (dropout off) ...
    assert model.training and all(m.training for m in model.modules())  # ... and is back in train mode


def test_the_bug_trains_through_the_course_loop_on_the_same_draws(course_tok):
    """training_batches with the buggy batch maker draws the same rows and masks as with the right one (the same
    generator, the same calls), so the two runs differ by the labels alone: the bug's loss falls far below the
    right one, since copying the input is easy."""
    blocks = pretraining.pack_blocks([corpus.pretraining_text("train", max_chars=20_000)], course_tok, 16)[:32]
    right = pretraining.training_batches(blocks, course_tok, 4, seed=3)
    buggy = pretraining.training_batches(blocks, course_tok, 4, seed=3, make_batch=objective_bug.buggy_mask_blocks)
    for _ in range(3):
        a, b = next(right), next(buggy)
        assert torch.equal(a["input_ids"], b["input_ids"]) and b["labels"] is b["input_ids"]
    config = TrainConfig(steps=60, batch_size=4, lr=3e-3, log_every=10)
    runs = {name: train(models.build_model("tiny", course_tok, max_positions=16), pretraining.training_batches(blocks, course_tok, 4, seed=0, make_batch=maker),
                        objective.masked_lm_loss, config, device="cpu")
            for name, maker in (("right", None), ("bug", objective_bug.buggy_mask_blocks))}
    last = {name: [row["loss"] for row in run.history if row["split"] == "train"][-1] for name, run in runs.items()}
    assert last["bug"] < 0.5 * last["right"]
