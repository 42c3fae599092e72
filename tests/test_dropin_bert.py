"""BertMLM as a drop-in for transformers' ``BertForMaskedLM`` / ``BertForPreTraining`` on the same weights: test
cases ported from transformers' tests/models/bert/test_modeling_bert.py (Apache License 2.0, Copyright 2020 The
HuggingFace Team), its ``BertModelTester`` model and inputs, every check against transformers' own logits."""

import re

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, BertForPreTraining

from mlm_course.bert import BertMLM

BATCH, LENGTH, HEADS, VOCAB = 13, 7, 4, 99
MIN = torch.finfo(torch.float32).min


def model_tester_config(attn: str) -> BertConfig:
    """``BertModelTester.get_config``: a tiny BERT (hidden 32, 2 layers, 4 heads, FFN 37, 16 segment types)."""
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=HEADS,
                        intermediate_size=37, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                        max_position_embeddings=512, type_vocab_size=16, initializer_range=0.02)
    config._attn_implementation = attn
    return config


def model_tester_inputs(seed: int = 0):
    """``BertModelTester.prepare_config_and_inputs``: ids, segment ids, a random 0/1 mask (``random_attention_mask``:
    the first token always on) and token labels (3 classes)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=g)
    segments = torch.randint(0, 16, (BATCH, LENGTH), generator=g)
    mask = torch.randint(0, 2, (BATCH, LENGTH), generator=g)
    mask[:, 0] = 1
    return ids, segments, mask, torch.randint(0, 3, (BATCH, LENGTH), generator=g)


def pair(model_class, attn: str):
    torch.manual_seed(0)
    theirs = model_class(model_tester_config(attn)).eval()
    return theirs, BertMLM.from_transformers(theirs)


def theirs_4d(mask: torch.Tensor, attn: str) -> torch.Tensor:
    """A 4-D mask as transformers 5 takes it, as it is: bool for SDPA, additive for eager (it adds what it gets)."""
    return mask.bool() if attn == "sdpa" else (1.0 - mask.float()) * MIN


def close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_for_masked_lm(attn):
    # ported from transformers tests/models/bert/test_modeling_bert.py::BertModelTest::test_for_masked_lm
    # (create_and_check_for_masked_lm), and create_and_check_model's three calls: with and without mask and segments
    theirs, ours = pair(BertForMaskedLM, attn)
    ids, segments, mask, labels = model_tester_inputs()
    with torch.no_grad():
        result = theirs(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels)
        logits = ours(input_ids=ids, attention_mask=mask, token_type_ids=segments)
        assert logits.shape == result.logits.shape == (BATCH, LENGTH, VOCAB)
        close(logits, result.logits)
        close(F.cross_entropy(logits.flatten(0, 1), labels.flatten()), result.loss)
        close(ours(ids, token_type_ids=segments), theirs(input_ids=ids, token_type_ids=segments).logits)
        close(ours(ids), theirs(input_ids=ids).logits)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_for_pretraining(attn):
    # ported from transformers tests/models/bert/test_modeling_bert.py::BertModelTest::test_for_pretraining
    # (create_and_check_for_pretraining): an in-memory BertForPreTraining, its next-sentence head left out as when
    # loading its folder; the MLM logits equal its prediction_logits, the pooler its pooler_output
    theirs, ours = pair(BertForPreTraining, attn)
    ids, segments, mask, labels = model_tester_inputs()
    with torch.no_grad():
        result = theirs(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels,
                        next_sentence_label=torch.zeros(BATCH, dtype=torch.long))
        assert result.seq_relationship_logits.shape == (BATCH, 2)
        close(ours(ids, mask, segments), result.prediction_logits)
        pooled = theirs.bert(input_ids=ids, attention_mask=mask, token_type_ids=segments).pooler_output
        close(ours.pooler(ours.last_hidden_state(ids, mask, segments)), pooled)
    assert not any("seq_relationship" in name for name in ours.state_dict())
    assert ours.attention_implementation == attn and not ours.training


def test_from_transformers_keeps_the_mode_and_the_dtype():
    torch.manual_seed(0)
    theirs = BertForPreTraining(model_tester_config("sdpa")).train().to(torch.float64)
    ours = BertMLM.from_transformers(theirs)
    assert ours.training and ours.embeddings.word.weight.dtype == torch.float64


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_model_3d_mask_shapes(attn):
    # modelled on transformers 4.x tests/models/bert/test_modeling_bert.py::BertModelTest::test_model_3d_mask_shapes
    # (not in the copy we ported from, so written from what it checks): a (batch, length, length) mask. transformers 5 takes it
    # only as (batch, 1, length, length), so its logits come from that form. Adapted: every query sees the first
    # token (random_attention_mask's "one token on", per query), else rows with no key differ by convention only
    theirs, ours = pair(BertForMaskedLM, attn)
    ids, segments, _, _ = model_tester_inputs()
    mask = torch.randint(0, 2, (BATCH, LENGTH, LENGTH), generator=torch.Generator().manual_seed(1))
    mask[:, :, 0] = 1
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=theirs_4d(mask[:, None], attn), token_type_ids=segments)
        close(ours(ids, mask, segments), expected.logits)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_every_mask_form_equals_transformers(attn):
    # the forms transformers' BERT takes: (batch, length) 0/1 in any dtype, and 4-D masks that broadcast to
    # (batch, heads, length, length), bool or additive, handed to the attention as they are
    theirs, ours = pair(BertForMaskedLM, attn)
    ids, segments, mask, _ = model_tester_inputs()
    keys = mask[:, None, None, :]
    forms = {"long": (mask, mask), "bool": (mask.bool(), mask.bool()), "float": (mask.float(), mask.float()),
             "4-D bool": (keys.bool(), theirs_4d(keys, attn)),
             "4-D additive": ((1.0 - keys.float()) * MIN, (1.0 - keys.float()) * MIN),
             "4-D per head": (keys.expand(BATCH, HEADS, LENGTH, LENGTH).bool(),
                              theirs_4d(keys.expand(BATCH, HEADS, LENGTH, LENGTH), attn)),
             "4-D for every row": (keys[:1].bool(), theirs_4d(keys[:1].expand(BATCH, 1, 1, LENGTH), attn))}
    with torch.no_grad():
        for name, (for_ours, for_theirs) in forms.items():
            expected = theirs(input_ids=ids, attention_mask=for_theirs, token_type_ids=segments).logits
            torch.testing.assert_close(ours(ids, for_ours, segments), expected, atol=1e-5, rtol=0, msg=name)


@pytest.mark.parametrize("shape", [(), (BATCH,), (LENGTH,), (BATCH, LENGTH + 1), (BATCH - 1, LENGTH),
                                   (BATCH, LENGTH, 1), (BATCH, 1, LENGTH), (BATCH, LENGTH, LENGTH + 1),
                                   (BATCH, 3, LENGTH, LENGTH), (2, 1, LENGTH, LENGTH), (BATCH, 1, LENGTH, 1, 1)],
                         ids=str)
def test_masks_of_other_shapes_are_refused_naming_the_shapes(shape):
    # transformers meets most of these deep inside (a reshape or broadcast error) or not at all (a mask of ones
    # is skipped): ours names the shape it got and every shape it takes, before any work
    _, ours = pair(BertForMaskedLM, "sdpa")
    ids, _, _, _ = model_tester_inputs()
    accepted = (rf"\(batch, length\) = \({BATCH}, {LENGTH}\).*\(batch, length, length\) = \({BATCH}, {LENGTH}, "
                rf"{LENGTH}\).*\(batch, heads, length, length\) = \({BATCH}, {HEADS}, {LENGTH}, {LENGTH}\)")
    with pytest.raises(ValueError, match=rf"attention_mask has shape {re.escape(str(shape))}.*{accepted}"):
        ours(ids, torch.ones(shape, dtype=torch.long))
