"""MLMCollator as a drop-in for transformers' ``DataCollatorForLanguageModeling``: test cases ported from
transformers' tests/trainer/test_data_collator.py (Apache License 2.0, Copyright 2020 The HuggingFace Team), run
on the course tokenizer, whose five special tokens are ids 0-4 as in that file's five-token test vocabulary."""

import copy

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import DataCollatorForLanguageModeling

from mlm_course.collator import MLMCollator
from mlm_course.masking import MaskSpec

NO_PAD = [{"input_ids": list(range(10))}, {"input_ids": list(range(10))}]
PAD = [{"input_ids": list(range(5))}, {"input_ids": list(range(10))}]  # the first row: special tokens only


def check_masked(batch, features):
    """Labels hold the original id where a token was selected and -100 elsewhere; unselected tokens unchanged."""
    rows = [f["input_ids"] if isinstance(f, dict) else f for f in features]
    original = torch.full_like(batch["input_ids"], 0)
    for i, row in enumerate(rows):
        original[i, :len(row)] = torch.as_tensor(row)
    selected = batch["labels"] != -100
    assert torch.equal(batch["labels"][selected], original[selected])
    assert not (selected & (original < 5)).any(), "a special token or padding was selected"
    assert torch.equal(batch["input_ids"][~selected], original[~selected])


@pytest.mark.parametrize("as_dicts", [True, False], ids=["dicts", "lists"])
def test_data_collator_for_language_modeling(course_tok, as_dicts):
    # ported from transformers tests/trainer/test_data_collator.py::DataCollatorIntegrationTest::
    # test_data_collator_for_language_modeling (its _test_no_pad_and_pad, mlm=True part)
    no_pad, pad = (NO_PAD, PAD) if as_dicts else ([f["input_ids"] for f in NO_PAD], [f["input_ids"] for f in PAD])
    for multiple, length in [(None, 10), (8, 16)]:
        collate = MLMCollator(course_tok, pad_to_multiple_of=multiple, seed=42)
        for features in (no_pad, pad):
            batch = collate(features)
            assert batch["input_ids"].shape == batch["labels"].shape == (2, length)
            check_masked(batch, features)
    # transformers asserts, at its seed, "some [MASK], and -100 wherever the input is not [MASK]": exact only when
    # every selected token becomes [MASK], so here with mask_mix (1, 0, 0)
    batch = MLMCollator(course_tok, MaskSpec(mask_rate=0.5, mask_mix=(1, 0, 0)), seed=42)(no_pad)
    masked = batch["input_ids"] == course_tok.mask_token_id  # id 4 is [MASK] itself, never selected
    assert (masked & (batch["labels"] != -100)).any() and (batch["labels"][~masked] == -100).all()


def test_a_tokenizer_without_padding_is_refused(course_tok):
    # ported from transformers ..._test_no_pad_and_pad: tokenizer._pad_token = None → ValueError (ours: when built)
    tokenizer = copy.deepcopy(course_tok)
    tokenizer.pad_token = None
    with pytest.raises(ValueError, match="no padding token"):
        MLMCollator(tokenizer)


def test_data_collator_for_whole_word_mask(course_tok):
    # ported from transformers tests/trainer/test_data_collator.py::DataCollatorIntegrationTest::
    # test_data_collator_for_whole_word_mask (DataCollatorForWholeWordMask → MaskSpec(whole_word=True))
    collate = MLMCollator(course_tok, MaskSpec(whole_word=True), seed=0)
    for features in (NO_PAD, [{"input_ids": np.arange(10)}, {"input_ids": np.arange(10)}]):  # or numpy arrays
        batch = collate(features)
        assert batch["input_ids"].shape == batch["labels"].shape == (2, 10)


@pytest.mark.parametrize(("label", "as_tensors"), [("next_sentence_label", False), ("sentence_order_label", True)])
def test_nsp_and_sop(course_tok, label, as_tensors):
    # ported from transformers tests/trainer/test_data_collator.py::DataCollatorIntegrationTest::test_nsp and
    # ::test_sop. Ids 0-4 are all special: a batch with nothing to mask gets labels of all -100, as in transformers
    wrap = torch.tensor if as_tensors else list
    features = [{"input_ids": wrap([0, 1, 2, 3, 4]), "token_type_ids": wrap([0, 1, 2, 3, 4]), label: i}
                for i in range(2)]
    for multiple, length in [(None, 5), (8, 8)]:
        ours = MLMCollator(course_tok, pad_to_multiple_of=multiple, seed=0)(features)
        theirs = DataCollatorForLanguageModeling(course_tok, pad_to_multiple_of=multiple, seed=0)(features)
        assert ours["input_ids"].shape == ours["token_type_ids"].shape == ours["labels"].shape == (2, length)
        assert ours[label].shape == (2,)
        assert set(ours) == set(theirs)
        for name, tensor in theirs.items():
            assert torch.equal(ours[name], tensor) and ours[name].dtype == tensor.dtype, name
        assert (ours["labels"] == -100).all()


@pytest.mark.parametrize("spec", [MaskSpec(), MaskSpec(whole_word=True), MaskSpec(mask_scheme="fixed")],
                         ids=["bernoulli", "whole word", "fixed"])
def test_a_batch_of_special_tokens_only_gets_all_labels_ignored(course_tok, spec):
    # transformers' collator returns labels of all -100 for such a batch; Trainer then trains on without it
    features = [{"input_ids": [2, 3]}, {"input_ids": [2, 3, 3]}, {"input_ids": [2, 1, 3]}]  # [CLS] [UNK] [SEP]
    batch = MLMCollator(course_tok, spec, seed=0)(features)
    theirs = DataCollatorForLanguageModeling(course_tok, seed=0)(features)
    assert torch.equal(batch["labels"], theirs["labels"]) and (batch["labels"] == -100).all()
    assert torch.equal(batch["input_ids"], theirs["input_ids"])
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1], [1, 1, 1]]


def test_an_id_outside_the_vocabulary_is_still_refused(course_tok):
    with pytest.raises(ValueError, match="vocab_size"):
        MLMCollator(course_tok, seed=0)([{"input_ids": [2, len(course_tok) + 5, 3]}])
    with pytest.raises(TypeError, match="integer token ids"):  # even when every one is a special id
        MLMCollator(course_tok, seed=0)([{"input_ids": [2.0, 3.0]}])


def test_other_fields_are_stacked_and_passed_on(course_tok):
    # what transformers' collator does through tokenizer.pad: fields it does not pad become (batch, ...) tensors
    features = [{"input_ids": [2, 400 + i, 3], "next_sentence_label": i, "weights": [0.5, 1.0], "flag": True}
                for i in range(3)]
    ours = MLMCollator(course_tok, seed=0)(features)
    theirs = DataCollatorForLanguageModeling(course_tok, seed=0)(features)
    for name in ("next_sentence_label", "weights", "flag"):
        assert torch.equal(ours[name], theirs[name]) and ours[name].dtype == theirs[name].dtype, name
    for name, values in [("note", ["a", "b"]), ("span", [[1], [1, 2]]), ("score", [None, None])]:
        with pytest.raises(ValueError, match=f"'{name}' values do not stack into one tensor"):
            MLMCollator(course_tok)([{"input_ids": [2, 400, 3], name: value} for value in values])
    with pytest.raises(ValueError, match="only some examples have 'next_sentence_label'"):
        MLMCollator(course_tok)([{"input_ids": [2, 400, 3], "next_sentence_label": 0}, {"input_ids": [2, 401, 3]}])


def test_labels_and_offsets_in_the_examples_are_not_passed_on(course_tok):
    # ported from transformers ...DataCollatorImmutabilityTest::test_language_modelling_collator_immutability's
    # features, labels (1,) kept: transformers replaces them by the masking labels and drops offset_mapping
    features = [{"input_ids": list(range(10)), "labels": (1,), "offset_mapping": [(0, 0)] * 10} for _ in range(2)]
    ours = MLMCollator(course_tok, seed=0)(features)
    theirs = DataCollatorForLanguageModeling(course_tok, seed=0)(features)
    assert set(ours) == set(theirs) == {"input_ids", "attention_mask", "labels"}
    assert ours["labels"].shape == theirs["labels"].shape == (2, 10)


@pytest.mark.parametrize("wrap", [list, tuple, torch.tensor, np.array], ids=lambda w: w.__name__)
def test_collator_immutability(course_tok, wrap):
    # ported from transformers tests/trainer/test_data_collator.py::DataCollatorImmutabilityTest::
    # test_language_modelling_collator_immutability, ::test_next_sentence_prediction_collator_immutability and
    # ::test_sentence_order_prediction_collator_immutability: the examples are left as they were
    batches = [[{"input_ids": wrap(range(10))}] * 2, [{"input_ids": wrap(range(5))}, {"input_ids": wrap(range(5))}],
               [{"input_ids": wrap([0, 1, 2, 3, 4]), "token_type_ids": wrap([0, 1, 2, 3, 4]),
                 "next_sentence_label": i} for i in range(2)],
               [{"input_ids": wrap([0, 1, 5, 6, 4]), "token_type_ids": wrap([0, 1, 2, 3, 4]),
                 "sentence_order_label": i} for i in range(2)]]
    for multiple in (None, 8):
        for features in batches:
            before = copy.deepcopy(features)
            MLMCollator(course_tok, MaskSpec(mask_rate=1.0), pad_to_multiple_of=multiple, seed=0)(features)
            for original, after in zip(before, features, strict=True):
                assert original.keys() == after.keys()
                for key, value in original.items():
                    assert np.array_equal(np.asarray(value), np.asarray(after[key])), key


def test_data_collator_for_language_modeling_with_seed(course_tok):
    # modelled on transformers tests/trainer/test_data_collator.py::DataCollatorIntegrationTest::
    # test_data_collator_for_language_modeling_with_seed (transformers >= 4.47): the copy we ported from predates
    # it, so this follows what that test checks, not its text:
    # one seed, the same masks, also across DataLoader workers (each its own seed); another seed, other masks
    features = [{"input_ids": list(range(1000))} for _ in range(2)]
    first, again = MLMCollator(course_tok, seed=42)(features), MLMCollator(course_tok, seed=42)(features)
    assert first["input_ids"].shape == first["labels"].shape == (2, 1000)
    assert torch.equal(first["input_ids"], again["input_ids"]) and torch.equal(first["labels"], again["labels"])

    def through_workers(seed):
        loader = torch.utils.data.DataLoader([{"input_ids": list(range(1000))}] * 10, batch_size=2, num_workers=2,
                                             collate_fn=MLMCollator(course_tok, seed=seed))
        return torch.cat([batch["input_ids"] for batch in loader])

    run = through_workers(42)
    assert torch.equal(run, through_workers(42))
    assert not torch.equal(run, through_workers(43))
    assert not torch.equal(run[:2], run[2:4]), "worker 0 and worker 1 drew the same masks"


@pytest.mark.parametrize("mix", [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.5, 0.4, 0.1)])
def test_replacement_shares_are_the_documented_ones(course_tok, mix):
    # ported from transformers' DataCollatorForLanguageModeling docstring, "Example Options and Expectations"
    # (mask_replace_prob, random_replace_prob = our mask_mix[0], mask_mix[1]): the shares of [MASK], random tokens
    # and unchanged tokens among the selected ones, within their 99.9 % binomial intervals; selection at 15 %
    features = [{"input_ids": [2, *range(5 + i, 505 + i), 3]} for i in range(40)]
    batch = MLMCollator(course_tok, MaskSpec(mask_mix=mix, random_from="vocab"), seed=0)(features)
    selected = batch["labels"] != -100
    n, seen = int(selected.sum()), batch["input_ids"][selected]
    unchanged = int((seen == batch["labels"][selected]).sum())
    chance = mix[1] / len(course_tok)  # a random token drawn from the whole vocabulary may be [MASK] or the original
    shares = {"selected": (n, 40 * 500, 0.15), "unchanged": (unchanged, n, mix[2] + chance),
              "[MASK]": (int((seen == course_tok.mask_token_id).sum()), n, mix[0] + chance)}
    for what, (count, trials, p) in shares.items():
        low, high = stats.binom.interval(0.999, trials, p)
        assert low <= count <= high, f"{what}: {count}/{trials}, outside [{low}, {high}] around {p}"


@pytest.mark.parametrize("pair", [(0, 1), (1, 0), (0, 0), (1, 1), (2, 3), (3, 2)])
def test_each_seed_and_worker_draws_its_own_reproducible_stream(course_tok, monkeypatch, pair):
    """A collator in DataLoader worker w draws from worker_seed(seed, w): (seed 0, worker 1) and (seed 1, worker 0)
    differ, as does every other pair, and the same pair draws the same masks again."""
    from mlm_course import collator

    pairs = [(seed, worker) for seed in range(4) for worker in range(4)]
    assert len({collator.worker_seed(seed, worker) for seed, worker in pairs}) == len(pairs)
    features = [{"input_ids": list(range(200))} for _ in range(2)]

    def in_worker(seed, worker):
        monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: type("Info", (), {"id": worker})())
        return MLMCollator(course_tok, seed=seed)(features)["labels"]

    seed, worker = pair
    mine = in_worker(seed, worker)
    assert torch.equal(mine, in_worker(seed, worker))
    for other in pairs:
        if other != pair:
            assert not torch.equal(mine, in_worker(*other)), f"{pair} and {other} drew the same masks"
