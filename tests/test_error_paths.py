"""Error paths a learner can reach: each raises a ValueError whose sentence says what to change."""

import itertools

import pytest
import torch
from accelerate import Accelerator
from transformers import BertConfig

from mlm_course import masking
from mlm_course.bert import BertMLM
from mlm_course.lab import cli
from mlm_course.lab.training_run import TrainingRun
from mlm_course.mask_checks import count_distinct_masks
from mlm_course.objective import masked_lm_loss
from mlm_course.train import TrainConfig, train_with_accelerate
from mlm_course.whole_word import word_starts

# ---- resuming into a model that does not fit the checkpoint -----------------------------------------------------

VOCAB = 50


def _bert(**overrides) -> BertMLM:
    torch.manual_seed(0)
    values = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=16, pad_token_id=0)
    return BertMLM(BertConfig(**{**values, **overrides}))


def _train(model, out_dir, *, resume: bool = False):
    """2 steps of the lessons' loop with Accelerate, a checkpoint after each, into ``out_dir`` (or resumed there)."""
    config = TrainConfig(steps=2, batch_size=2, lr=1e-3, warmup_steps=0, eval_every=10, log_every=1)
    ids = torch.randint(1, VOCAB, (2, 8), generator=torch.Generator().manual_seed(0))
    run = TrainingRun(out_dir, save_every=1, settings={"steps": 2, "batch_size": 2, "grad_accum": 1, "lr": 1e-3,
                                                       "seed": 0}, resume=resume)
    return train_with_accelerate(model, itertools.repeat({"input_ids": ids, "labels": ids}), masked_lm_loss, config,
                                 accelerator=Accelerator(cpu=True), run=run)


@pytest.fixture(scope="module")
def checkpointed_run(tmp_path_factory):
    """A finished 2-step run of a 1-layer, hidden-16 BERT with its checkpoints."""
    out = tmp_path_factory.mktemp("run")
    _train(_bert(), out)
    return out


def test_resume_into_the_same_model_works(checkpointed_run):
    assert _train(_bert(), checkpointed_run, resume=True).steps == 2


def test_resume_into_a_deeper_model_names_both_shapes(checkpointed_run):
    with pytest.raises(ValueError) as error:
        _train(_bert(num_hidden_layers=2), checkpointed_run, resume=True)
    assert str(error.value) == (
        f"the checkpoint in {checkpointed_run / 'checkpoint-2'} is custom (hidden 16, 1 layer, vocabulary 50) but "
        "this run builds custom (hidden 16, 2 layers, vocabulary 50): resume with the model configuration it was "
        "trained with or start a new --out")


def test_resume_into_a_wider_model_names_both_shapes(checkpointed_run):
    with pytest.raises(ValueError, match=r"is custom \(hidden 16, 1 layer, vocabulary 50\) but this run builds "
                                         r"custom \(hidden 24, 1 layer, vocabulary 50\)"):
        _train(_bert(hidden_size=24, num_attention_heads=2), checkpointed_run, resume=True)


def test_resume_with_another_vocabulary_names_both_and_the_tokenizer(checkpointed_run):
    with pytest.raises(ValueError, match=r"vocabulary 50\) but this run builds custom \(hidden 16, 1 layer, "
                                         r"vocabulary 60\): resume with the tokenizer it was trained with or start "
                                         r"a new --out"):
        _train(_bert(vocab_size=60), checkpointed_run, resume=True)


# ---- masking ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(8,), (2, 3, 4)])
def test_select_positions_needs_a_2d_batch(shape):
    with pytest.raises(ValueError, match=r"must be 2-D \(batch, length\)"):
        masking.select_positions(torch.ones(shape, dtype=torch.bool), masking.MaskSpec())


def test_word_starts_takes_word_ids_or_continuation_not_both():
    with pytest.raises(ValueError, match="either word_ids or continuation"):
        word_starts(word_ids=torch.tensor([[0, 0, 1, 2]]), continuation=torch.tensor([[0, 1, 0, 0]]))
    with pytest.raises(ValueError, match="either word_ids or continuation"):
        word_starts()
    with pytest.raises(TypeError, match=r"word_ids must be a tensor \(batch, length\)"):
        word_starts(word_ids=[0, 0, 1])
    with pytest.raises(ValueError, match=r"continuation must be 2-D \(batch, length\), got shape \(3,\)"):
        word_starts(continuation=torch.tensor([False, True, False]))


def test_random_replacements_need_an_ordinary_id():
    only_special = masking.TokenIds(mask_token_id=0, special_ids=(0, 1, 2), vocab_size=3)
    with pytest.raises(ValueError, match="every id of the vocabulary is special"):
        masking.mask_tokens(torch.tensor([[1, 2]]), masking.MaskSpec(), only_special)
    one_ordinary = masking.TokenIds(mask_token_id=0, special_ids=(0, 1), vocab_size=3)
    all_random = masking.MaskSpec(mask_rate=1.0, mask_mix=(0, 1, 0))
    out = masking.mask_tokens(torch.tensor([[1, 2, 2]]), all_random, one_ordinary)  # one ordinary id is enough
    assert out.input_ids.tolist() == [[1, 2, 2]] and out.action.tolist() == [[0, masking.RANDOM, masking.RANDOM]]


def test_count_distinct_masks_of_no_batches():
    with pytest.raises(ValueError, match="batches is empty"):
        count_distinct_masks([])


# ---- the command line: every command is in the top-level help -----------------------------------------------------


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for command in ("pretrain", "finetune", "fill-mask"):
        assert command in out, f"{command} is missing from `mlm-course --help`"
