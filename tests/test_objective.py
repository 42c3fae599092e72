"""mlm_loss, its training path masked_lm_loss, masked_accuracy and pseudo-log-likelihood against torch,
transformers and hand-computed values."""

import math

import pytest
import torch
import torch.nn.functional as F

from mlm_course import corpus, masking, models, objective, pretraining

# bf16 autocast vs float32 forward pass: the measured relative difference of the loss was ≤ 5e-5 on these random
# models and 8e-5 on the tiny course checkpoint (2-core CPU). bf16 keeps 8 significant bits (each logit rounded by up
# to 2^-9 ≈ 2e-3 relative), and a model with larger, peakier logits moves the loss more, so the stated bound is 2e-2.
# Comparisons on the *same* bf16 logits stay at 1e-5.
BF16_RTOL = 2e-2



@pytest.fixture
def small_model(small_bert):
    return small_bert().eval()


def library(model):
    """transformers' BertForMaskedLM with ``model``'s weights (saved by it, loaded by transformers), same mode."""
    import tempfile

    from transformers import BertForMaskedLM

    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        theirs = BertForMaskedLM.from_pretrained(folder, attn_implementation="sdpa")
    return theirs.train(model.training)


def _masked_batch(tok, seed=0, pad=False):
    texts = ["She opened the door and walked out into the garden.", "It was a cold morning.",
             "The king and the queen sat on their thrones in the great hall."]
    enc = tok(texts, padding=True, return_tensors="pt") if pad else None
    if enc is None:
        ids = [tok(t)["input_ids"][:8] for t in texts]
        enc = {"input_ids": torch.tensor(ids), "attention_mask": torch.ones(len(ids), 8, dtype=torch.long)}
    masked = masking.mask_tokens(enc["input_ids"], masking.MaskSpec(mask_rate=0.4), masking.TokenIds.of(tok),
                                 attention_mask=enc["attention_mask"], generator=torch.Generator().manual_seed(seed))
    return masked.input_ids, enc["attention_mask"], masked.labels


# ---- mlm_loss ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_mlm_loss_equals_cross_entropy_and_bert_loss(small_bert, course_tok, pad, seed):
    model = library(small_bert(seed, 64).eval())
    ids, attention, labels = _masked_batch(course_tok, seed, pad)
    if pad:
        assert (attention == 0).any() and (labels[attention == 0] == -100).all()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=attention, labels=labels)
    ours = objective.mlm_loss(out.logits, labels)
    torch_ce = F.cross_entropy(out.logits.view(-1, out.logits.shape[-1]), labels.view(-1), ignore_index=-100)
    assert torch.allclose(ours, torch_ce, atol=1e-5, rtol=0)
    assert torch.allclose(ours, out.loss, atol=1e-5, rtol=0)


def test_mlm_loss_under_bf16_autocast(course_tok, small_model):
    small_model = library(small_model)
    ids, attention, labels = _masked_batch(course_tok, 3, pad=True)
    with torch.no_grad():
        fp32 = small_model(input_ids=ids, attention_mask=attention, labels=labels)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = small_model(input_ids=ids, attention_mask=attention, labels=labels)
    assert bf16.logits.dtype == torch.bfloat16
    # same bf16 logits: our loss (computed in float32) equals the library's
    assert torch.allclose(objective.mlm_loss(bf16.logits, labels), bf16.loss.float(), atol=1e-5, rtol=0)
    # bf16 vs float32 forward pass: close within the stated tolerance, but not bit-identical
    rel = abs(float(objective.mlm_loss(bf16.logits, labels)) - float(fp32.loss)) / float(fp32.loss)
    assert 0 < rel < BF16_RTOL


def test_mlm_loss_on_the_shipped_checkpoint():
    try:
        corpus.course_checkpoint_dir()
    except FileNotFoundError:
        pytest.skip("the shipped course checkpoint is not there yet")
    model, tok = models.load_mlm("course")
    model = library(model)
    ids, attention, labels = _masked_batch(tok, 0, pad=True)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=attention, labels=labels)
    assert torch.allclose(objective.mlm_loss(out.logits, labels), out.loss, atol=1e-5, rtol=0)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = model(input_ids=ids, attention_mask=attention, labels=labels)
    assert torch.allclose(objective.mlm_loss(bf16.logits, labels), bf16.loss.float(), atol=1e-5, rtol=0)
    assert abs(float(objective.mlm_loss(bf16.logits, labels)) / float(out.loss) - 1) < BF16_RTOL


def _logits_from_probs(probs):
    return torch.tensor(probs, dtype=torch.float64).log()


def test_reductions_by_hand():
    # row 0: true tokens with p = 1/2 and 1/4 (and one ignored position); row 1: p = 1/8 (others ignored)
    q = [0.5, 0.25, 0.125, 0.125]
    logits = _logits_from_probs([[q, q, q], [q, q, q]])
    labels = torch.tensor([[0, 1, -100], [-100, 2, -100]])
    ln2 = math.log(2)
    assert math.isclose(float(objective.mlm_loss(logits, labels)), (1 + 2 + 3) * ln2 / 3, rel_tol=1e-12)
    assert math.isclose(float(objective.mlm_loss(logits, labels, "sum")), 6 * ln2, rel_tol=1e-12)
    per_seq = ((1 + 2) / 2 + 3) / 2 * ln2  # 2.25 ln 2: the short row weighs as much as the long one
    assert math.isclose(float(objective.mlm_loss(logits, labels, "per_sequence_mean")), per_seq, rel_tol=1e-12)
    none = objective.mlm_loss(logits, labels, "none")
    assert torch.allclose(none, torch.tensor([[ln2, 2 * ln2, 0], [0, 3 * ln2, 0]], dtype=torch.float64))


def test_per_sequence_mean_skips_rows_without_masks():
    q = [0.5, 0.5]
    logits = _logits_from_probs([[q, q], [q, q]])
    labels = torch.tensor([[0, -100], [-100, -100]])
    assert math.isclose(float(objective.mlm_loss(logits, labels, "per_sequence_mean")), math.log(2), rel_tol=1e-12)


def test_mean_gradient_per_token_scales_with_one_over_n_masked():
    torch.manual_seed(0)
    base = torch.randn(2, 6, 11)
    labels_few = torch.full((2, 6), -100)
    labels_few[0, 1], labels_few[1, 3] = 4, 7
    labels_many = labels_few.clone()
    labels_many[0, 2:6], labels_many[1, 0:2] = torch.tensor([1, 2, 3, 5]), torch.tensor([9, 10])

    def grad(labels, reduction):
        logits = base.clone().requires_grad_(True)
        objective.mlm_loss(logits, labels, reduction).backward()
        return logits.grad

    g_few, g_many = grad(labels_few, "mean"), grad(labels_many, "mean")
    n_few, n_many = 2, 8
    expected = (base[0, 1].softmax(-1) - F.one_hot(torch.tensor(4), 11)) / n_few  # (p − onehot) / N
    assert torch.allclose(g_few[0, 1], expected, atol=1e-6)
    assert torch.allclose(g_few[0, 1] * n_few / n_many, g_many[0, 1], atol=1e-7)
    assert (g_few[labels_few == -100] == 0).all()
    # with "sum" the per-token gradient does not depend on how many positions are masked
    assert torch.allclose(grad(labels_few, "sum")[0, 1], grad(labels_many, "sum")[0, 1], atol=1e-7)


def test_mlm_loss_errors():
    logits = torch.randn(2, 3, 5)
    with pytest.raises(ValueError, match="nothing to predict"):
        objective.mlm_loss(logits, torch.full((2, 3), -100))
    with pytest.raises(ValueError, match="do not fit"):
        objective.mlm_loss(logits, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer token ids"):
        objective.mlm_loss(logits, torch.zeros(2, 3))
    with pytest.raises(TypeError, match="floating point"):
        objective.mlm_loss(torch.zeros(2, 3, 5, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="outside"):
        objective.mlm_loss(logits, torch.full((2, 3), 5))
    with pytest.raises(ValueError, match="reduction"):
        objective.mlm_loss(logits, torch.zeros(2, 3, dtype=torch.long), reduction="avg")
    with pytest.raises(ValueError, match="batch of sequences"):
        objective.mlm_loss(torch.randn(3, 5), torch.zeros(3, dtype=torch.long), reduction="per_sequence_mean")


# ---- masked_lm_loss: the same loss on the training path ------------------------------------------------------


@pytest.mark.parametrize("positions", ["given", "none"])
def test_masked_lm_loss_is_mlm_loss(course_tok, small_model, positions):
    """Sparse logits (only the masked positions projected) and full logits give :func:`mlm_loss` of the full
    logits; so do the (logits, labels) of :func:`masked_lm_outputs`."""
    ids, attention, labels = _masked_batch(course_tok, 2, pad=True)
    batch = {"input_ids": ids, "attention_mask": attention, "labels": labels}
    if positions == "given":
        batch["masked_positions"] = objective.masked_positions(labels)
        assert torch.equal(labels.flatten()[batch["masked_positions"]], labels[labels != -100])
    with torch.no_grad():
        fast = objective.masked_lm_loss(small_model, batch)
        logits = small_model(ids, attention)
        at, true = objective.masked_lm_outputs(small_model, batch)
    assert fast.dtype == torch.float32 and fast.dim() == 0
    assert torch.allclose(fast, objective.mlm_loss(logits, labels), atol=1e-5, rtol=0)
    assert torch.equal(true, labels[labels != -100])
    torch.testing.assert_close(at, logits[labels != -100], atol=1e-5, rtol=0)


def test_masked_lm_loss_is_mlm_loss_under_bf16_autocast(course_tok, small_model):
    ids, attention, labels = _masked_batch(course_tok, 3, pad=True)
    batch = {"input_ids": ids, "attention_mask": attention, "labels": labels}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        fast = objective.masked_lm_loss(small_model, batch)
        logits = small_model(ids, attention)
    assert logits.dtype == torch.bfloat16 and fast.dtype == torch.float32  # both computed in float32
    assert torch.allclose(fast, objective.mlm_loss(logits, labels), atol=1e-5, rtol=0)


@pytest.fixture
def blocks(bert_tok, sample_text):
    return pretraining.pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_sparse_logits_loss_equals_full_logits_and_library_loss(tiny_model, blocks, bert_tok, dropout):
    """In train mode: one seed draws the same dropout masks in the encoder (the MLM head has none), so the sparse
    loss equals the full-logits loss and transformers' loss on the same weights even with dropout on; another seed
    changes it only then."""
    model = tiny_model(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout).train()
    theirs = library(model)
    batch = pretraining.mask_blocks(blocks, bert_tok, masking.MaskSpec(), torch.Generator().manual_seed(1))
    full_batch = {k: v for k, v in batch.items() if k != "masked_positions"}

    def seeded(loss, seed=0):
        torch.manual_seed(seed)
        return loss()

    sparse = seeded(lambda: objective.masked_lm_loss(model, batch))
    full = seeded(lambda: objective.masked_lm_loss(model, full_batch))
    transformers_loss = seeded(lambda: theirs(**full_batch).loss)
    assert torch.allclose(sparse, full, atol=1e-6) and torch.allclose(sparse, transformers_loss, atol=1e-6)
    other_seed = seeded(lambda: objective.masked_lm_loss(model, batch), seed=1)
    assert torch.allclose(other_seed, sparse, atol=1e-6) is (dropout == 0.0)  # dropout really acts at 0.1


def test_sparse_gradients_equal_full_gradients(tiny_model, blocks, bert_tok):
    batch = pretraining.mask_blocks(blocks, bert_tok, masking.MaskSpec(), torch.Generator().manual_seed(2))
    grads = []
    for keep in (True, False):
        model = tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        objective.masked_lm_loss(model, {k: v for k, v in batch.items() if keep or k != "masked_positions"}).backward()
        grads.append(model.embeddings.word.weight.grad)
    assert torch.allclose(*grads, atol=1e-6)


def test_batch_without_masked_positions_is_an_error(tiny_model, blocks):
    batch = {"input_ids": blocks, "attention_mask": torch.ones_like(blocks), "labels": torch.full_like(blocks, -100)}
    batch["masked_positions"] = objective.masked_positions(batch["labels"])
    with pytest.raises(ValueError, match="no masked position"):
        objective.masked_lm_loss(tiny_model(), batch)


# ---- masked_accuracy ---------------------------------------------------------------------------------------------


def test_masked_accuracy_by_hand():
    logits = torch.tensor([[[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 3.0, 2.0], [0.0, 0.0, 0.0, 9.0]]])
    labels = torch.tensor([[0, 3, -100]])  # right at rank 1; at rank 2; ignored (would be right)
    assert objective.masked_accuracy(logits, labels) == 0.5
    assert objective.masked_accuracy(logits, labels, k=2) == 1.0
    with pytest.raises(ValueError, match="k="):
        objective.masked_accuracy(logits, labels, k=0)
    with pytest.raises(ValueError, match="nothing to predict"):
        objective.masked_accuracy(logits, torch.full((1, 3), -100))


def test_masked_accuracy_matches_evaluate_masked_lm(course_tok, small_model):
    blocks = pretraining.pack_blocks([corpus.pretraining_text("heldout", max_chars=20_000)], course_tok, 32)[:8]
    batches = pretraining.frozen_eval_batches(blocks, course_tok, pretraining.MaskSpec(), batch_size=8)
    ref = pretraining.evaluate_masked_lm(small_model, batches)
    with torch.no_grad():
        logits = small_model(batches[0]["input_ids"])
    assert math.isclose(objective.masked_accuracy(logits, batches[0]["labels"]), ref["top1"], abs_tol=1e-9)
    assert math.isclose(objective.masked_accuracy(logits, batches[0]["labels"], k=5), ref["top5"], abs_tol=1e-9)
    assert math.isclose(float(objective.mlm_loss(logits, batches[0]["labels"])), ref["loss"], abs_tol=1e-5)


# ---- the independence approximation -----------------------------------------------------------------------------


def test_factorised_joint_by_hand():
    # new york / los angeles / san francisco, equally likely: the product of marginals spreads 2/3 of the mass
    joint = torch.eye(3, dtype=torch.float64) / 3
    f = objective.factorised_joint(joint)
    assert torch.allclose(f.first, torch.full((3,), 1 / 3, dtype=torch.float64))
    assert torch.allclose(f.product, torch.full((3, 3), 1 / 9, dtype=torch.float64))
    assert math.isclose(float(f.product.diagonal().sum()), 1 / 3)
    assert math.isclose(f.mutual_information, math.log(3), rel_tol=1e-12)
    a, b = torch.tensor([0.2, 0.8], dtype=torch.float64), torch.tensor([0.5, 0.5], dtype=torch.float64)
    independent = objective.factorised_joint(torch.outer(a, b))
    assert abs(independent.mutual_information) < 1e-12
    assert torch.allclose(independent.product, independent.joint)
    with pytest.raises(ValueError, match="sum to 1"):
        objective.factorised_joint([[0.5, 0.6], [0.0, 0.0]])
    with pytest.raises(ValueError, match="2-D"):
        objective.factorised_joint([0.5, 0.5])


# ---- pseudo-log-likelihood --------------------------------------------------------------------------------------


def test_masked_copies_by_hand():
    ids = torch.tensor([2, 10, 11, 12, 13, 3])
    positions = torch.tensor([1, 2, 3, 4])
    copies = objective.masked_copies(ids, positions, 4)
    assert copies.tolist() == [[2, 4, 11, 12, 13, 3], [2, 10, 4, 12, 13, 3], [2, 10, 11, 4, 13, 3],
                               [2, 10, 11, 12, 4, 3]]
    words = torch.tensor([-1, 0, 1, 1, 1, -1])  # pieces 2-4 are one word
    copies = objective.masked_copies(ids, positions, 4, words)
    assert copies.tolist() == [[2, 4, 11, 12, 13, 3], [2, 10, 4, 4, 4, 3], [2, 10, 11, 4, 4, 3],
                               [2, 10, 11, 12, 4, 3]]


SENTENCE = "Unbelievably, the wanderer returned home."


@pytest.mark.parametrize("batch_size", [1, 3, 64])
@pytest.mark.parametrize("word_level", [False, True])
def test_pll_batched_equals_naive_loop(course_tok, small_model, batch_size, word_level):
    result = objective.pseudo_log_likelihood(small_model, course_tok, SENTENCE, batch_size=batch_size,
                                             word_level=word_level)
    naive = objective.pseudo_log_likelihood_naive(small_model, course_tok, SENTENCE, word_level=word_level)
    assert math.isclose(result.total, naive, abs_tol=1e-5)
    assert math.isclose(result.total, float(result.log_probs.sum()), abs_tol=1e-9)


def test_pll_scores_every_non_special_token(course_tok, small_model):
    result = objective.pseudo_log_likelihood(small_model, course_tok, SENTENCE)
    assert result.tokens == course_tok.tokenize(SENTENCE)
    assert len(result.log_probs) == len(result.tokens) and (result.log_probs < 0).all()
    assert result.positions.tolist() == list(range(1, len(result.tokens) + 1))
    assert math.isclose(result.pseudo_perplexity, math.exp(-result.total / len(result.tokens)))
    assert math.isclose(objective.pseudo_perplexity(small_model, course_tok, SENTENCE), result.pseudo_perplexity)


def test_word_level_pll_differs_only_for_multi_piece_words(course_tok, small_model):
    multi = "Unbelievably, the wanderer returned."
    single = "the cat sat on the mat ."
    assert any(t.startswith("##") for t in course_tok.tokenize(multi))
    assert not any(t.startswith("##") for t in course_tok.tokenize(single))
    a = objective.pseudo_log_likelihood(small_model, course_tok, multi)
    b = objective.pseudo_log_likelihood(small_model, course_tok, multi, word_level=True)
    assert not math.isclose(a.total, b.total, abs_tol=1e-6)
    last_pieces = [i for i, t in enumerate(a.tokens) if i + 1 == len(a.tokens) or not a.tokens[i + 1].startswith("##")]
    assert torch.allclose(a.log_probs[last_pieces], b.log_probs[last_pieces], atol=1e-9)  # nothing more to mask
    c = objective.pseudo_log_likelihood(small_model, course_tok, single)
    d = objective.pseudo_log_likelihood(small_model, course_tok, single, word_level=True)
    assert math.isclose(c.total, d.total, abs_tol=1e-9)


def test_pll_restores_training_mode(course_tok, small_model):
    small_model.train()
    try:
        objective.pseudo_log_likelihood(small_model, course_tok, "a short one.")
        assert small_model.training
    finally:
        small_model.eval()


def _scorers(course_tok):
    """Each function that switches a model to eval mode for scoring, called on one short input (the experiments'
    :func:`~mlm_course.objective_bug.evaluate_by_action` is checked in test_objective_bug.py)."""
    return {
        "pll": lambda m: objective.pseudo_log_likelihood(m, course_tok, "a short one."),
        "pll_naive": lambda m: objective.pseudo_log_likelihood_naive(m, course_tok, "a short one."),
    }


@pytest.mark.parametrize("scorer", ["pll", "pll_naive"])
def test_scoring_restores_training_mode_when_the_forward_pass_fails(small_bert, course_tok, scorer, fail_forward):
    """A forward pass that raises (out of memory, say) must not leave a training model in eval mode."""
    model = small_bert(0, 64).train()
    seen = fail_forward(model)
    with pytest.raises(RuntimeError, match="simulated"):
        _scorers(course_tok)[scorer](model)
    assert seen == [False]  # it scored in eval mode (dropout off) ...
    assert model.training and all(m.training for m in model.modules())  # ... and is back in train mode


def test_pll_errors(course_tok, small_model):
    with pytest.raises(ValueError, match="non-empty string"):
        objective.pseudo_log_likelihood(small_model, course_tok, "  ")
    with pytest.raises(ValueError, match="no token to score"):
        objective.pseudo_log_likelihood(small_model, course_tok, "[MASK]")
    with pytest.raises(ValueError, match="batch_size"):
        objective.pseudo_log_likelihood(small_model, course_tok, "a cat.", batch_size=0)
    with pytest.raises(ValueError, match="pairs is empty"):
        objective.compare_pairs(small_model, course_tok, [])


def test_compare_pairs_counts_wins(course_tok, small_model):
    pairs = [("the cat sat.", "sat cat the."), ("a dog ran.", "ran a dog.")]
    out = objective.compare_pairs(small_model, course_tok, pairs)
    wins = sum(g > b for g, b in zip(out["good"], out["bad"], strict=True))
    assert out["fraction_good_higher"] == wins / 2
    assert out["good"][0] == objective.pseudo_log_likelihood(small_model, course_tok, "the cat sat.").total


def test_scramble_keeps_the_words():
    s = "She opened the door and walked out."
    shuffled = objective.scramble(s, seed=0)
    assert shuffled != s and shuffled.endswith(".")
    assert sorted(shuffled[:-1].split()) == sorted(s[:-1].split())
    assert objective.scramble(s, seed=0) == shuffled


def test_bert_for_masked_lm_with_conftest_vocab(bert_tok, tiny_model):
    # the loss is vocabulary-agnostic: bert-base-uncased ids, padding, a different config
    model = library(tiny_model(seed=1).eval())
    enc = bert_tok(["the quick brown fox jumps", "hello"], padding=True, return_tensors="pt")
    mb = masking.mask_tokens(enc["input_ids"], masking.MaskSpec(mask_rate=0.5), masking.TokenIds.of(bert_tok),
                             attention_mask=enc["attention_mask"], generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = model(input_ids=mb.input_ids, attention_mask=enc["attention_mask"], labels=mb.labels)
    assert torch.allclose(objective.mlm_loss(out.logits, mb.labels), out.loss, atol=1e-5, rtol=0)
