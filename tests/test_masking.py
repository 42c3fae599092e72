"""mlm_course.masking (+ whole_word, collator, mask_checks): statistics with stated 99.9 % bounds, invariants
(hypothesis), agreement with transformers' DataCollatorForLanguageModeling and with a port of the original BERT
code, masks pinned to stored values, the MaskSpec and TokenIds, the collator (incl. Trainer), errors."""

import random
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)

from mlm_course import mask_checks, masking, pretraining, whole_word
from mlm_course.collator import MLMCollator
from mlm_course.masking import (
    IGNORE_INDEX,
    KEPT,
    MASKED,
    NOT_SELECTED,
    RANDOM,
    MaskSpec,
    TokenIds,
    mask_tokens,
)

CONF = 0.999
PAD, CLS, SEP, MASK, UNK = 0, 1, 2, 3, 4  # the toy vocabulary's specials
TOY_SPECIALS = [PAD, CLS, SEP, MASK, UNK]
TOY_VOCAB = 50
TOY_TOKENS = TokenIds(mask_token_id=MASK, special_ids=tuple(TOY_SPECIALS), vocab_size=TOY_VOCAB)


def toy_batch(rows, length, seed, *, min_len=3):
    """[CLS] body [SEP] rows of random lengths, right-padded with PAD, over the toy vocabulary."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, TOY_VOCAB, (rows, length), generator=g)
    lens = torch.randint(min_len, length + 1, (rows,), generator=g)
    pos = torch.arange(length)[None, :]
    ids[:, 0] = CLS
    ids[pos == (lens[:, None] - 1)] = SEP
    ids[pos >= lens[:, None]] = PAD
    return ids, (pos < lens[:, None]).long()


def toy_mask(ids, attention, spec=MaskSpec(), **kw):
    return mask_tokens(ids, spec, TOY_TOKENS, attention_mask=attention, **kw)


def starts_of(continuation):
    """``word_starts`` for a whole-word ``toy_mask``: a word is a token and the ## pieces after it."""
    return whole_word.word_starts(continuation=continuation)


def maskable_words(maskable, continuation):
    """True at the first piece of every maskable word (a special token or padding ends a word)."""
    after_unmaskable = ~torch.nn.functional.pad(maskable, (1, 0))[:, :-1]
    return maskable & (starts_of(continuation) | after_unmaskable)


@pytest.fixture(scope="module")
def toy_tok():
    """A BertTokenizer over the toy vocabulary: [PAD] 0, [CLS] 1, [SEP] 2, [MASK] 3, [UNK] 4, then w5 … w49."""
    names = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + [f"w{i}" for i in range(5, TOY_VOCAB)]
    return BertTokenizer(vocab={name: i for i, name in enumerate(names)})


def in_binom_interval(count, trials, p, what):
    low, high = stats.binom.interval(CONF, trials, p)
    assert low <= count <= high, (
        f"{what}: {count}/{trials} = {count / trials:.5f}, outside the 99.9 % binomial interval "
        f"[{low / trials:.5f}, {high / trials:.5f}] around {p}"
    )


def py2_round(x):
    return int(Decimal(x).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def py3_round(x):
    return int(Decimal(x).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


# ---- statistics ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_batch():
    return toy_batch(7000, 128, seed=1, min_len=96)  # ≈ 0.78 M maskable tokens → ≈ 117 k selections at 15 %


@pytest.mark.parametrize("scheme", ["bernoulli", "fixed"])
def test_selection_rate_and_mix_inside_999_intervals(big_batch, scheme):
    ids, att = big_batch
    out = toy_mask(ids, att, MaskSpec(mask_scheme=scheme), generator=torch.Generator().manual_seed(2))
    n_maskable, n_sel = int(out.maskable.sum()), int(out.selected.sum())
    assert n_sel >= 100_000
    if scheme == "bernoulli":
        in_binom_interval(n_sel, n_maskable, 0.15, "selection rate")
    for code, share, name in [(MASKED, 0.8, "[MASK]"), (RANDOM, 0.1, "random"), (KEPT, 0.1, "unchanged")]:
        in_binom_interval(int((out.action == code).sum()), n_sel, share, f"{scheme}: share {name}")


def test_fixed_count_masks_exactly_the_formula_on_every_row(big_batch):
    ids, att = big_batch
    for rounding, ref in [("half_up", py2_round), ("half_even", py3_round)]:
        out = toy_mask(ids, att, MaskSpec(mask_scheme="fixed", max_predictions=20, rounding=rounding),
                       generator=torch.Generator().manual_seed(3))
        n = att.sum(1).tolist()  # the original counts every token, [CLS] and [SEP] included
        expected = torch.tensor([min(20, max(1, ref(k * 0.15)), m) for k, m in zip(n, out.maskable.sum(1).tolist(), strict=True)])
        assert torch.equal(out.selected.sum(1), expected)


def test_fixed_count_is_uniform_over_maskable_positions():
    ids, att = toy_batch(30_000, 12, seed=4, min_len=12)  # [CLS] + 10 + [SEP]: k = max(1, round(1.8)) = 2
    out = toy_mask(ids, att, MaskSpec(mask_scheme="fixed"), generator=torch.Generator().manual_seed(5))
    assert (out.selected.sum(1) == 2).all()
    counts = out.selected[:, 1:11].sum(0)
    p = stats.chisquare(counts.numpy()).pvalue
    assert p > 0.001, f"positions not uniform: chi-square p = {p:.2g} ≤ 0.001; counts {counts.tolist()}"


@pytest.mark.parametrize("random_from", ["non_special", "vocab"])
def test_random_replacements_uniform_over_allowed_tokens(big_batch, random_from):
    ids, att = big_batch
    out = toy_mask(ids, att, MaskSpec(mask_rate=1.0, mask_mix=(0, 1, 0), random_from=random_from),
                   generator=torch.Generator().manual_seed(6))
    drawn = out.input_ids[out.action == RANDOM]
    assert len(drawn) >= 100_000
    counts = torch.bincount(drawn, minlength=TOY_VOCAB)
    allowed = torch.arange(TOY_VOCAB) if random_from == "vocab" else torch.arange(5, TOY_VOCAB)
    if random_from == "non_special":
        assert counts[:5].sum() == 0, "a special token was drawn as a random replacement"
    p = stats.chisquare(counts[allowed].numpy()).pvalue
    assert p > 0.001, f"random replacements not uniform over {len(allowed)} tokens: chi-square p = {p:.2g} ≤ 0.001"


def test_whole_word_bernoulli_rate_and_fixed_budget(big_batch):
    ids, att = big_batch
    cont = torch.rand(ids.shape, generator=torch.Generator().manual_seed(7)) < 0.3
    out = toy_mask(ids, att, MaskSpec(whole_word=True), word_starts=starts_of(cont),
                   generator=torch.Generator().manual_seed(8))
    in_binom_interval(int(out.selected.sum()), int(out.maskable.sum()), 0.15, "whole-word token rate")
    starts = maskable_words(out.maskable, cont)
    in_binom_interval(int((out.selected & starts).sum()), int(starts.sum()), 0.15, "whole-word word rate")
    fixed = toy_mask(ids, att, MaskSpec(whole_word=True, mask_scheme="fixed"), word_starts=starts_of(cont),
                     generator=torch.Generator().manual_seed(9))
    k = masking.num_to_predict(att.sum(1), MaskSpec())
    assert (fixed.selected.sum(1) <= k).all()
    assert fixed.selected.sum() >= 0.97 * k.sum(), "greedy fill should come close to the budget"


def test_measure_rates_counts(big_batch):
    ids, att = big_batch
    out = toy_mask(ids, att, generator=torch.Generator().manual_seed(10))
    r = mask_checks.measure_rates(out)
    assert r["selected"]["trials"] == int(out.maskable.sum())
    assert r["[MASK]"]["count"] + r["random"]["count"] + r["unchanged"]["count"] == r["selected"]["count"]
    assert r["selected"]["low"] < 0.15 < r["selected"]["high"]


# ---- the count formula and the original algorithm -----------------------------------------------------------


def test_num_to_predict_matches_python2_and_python3_round():
    n = torch.arange(0, 600)
    for rounding, ref in [("half_up", py2_round), ("half_even", py3_round)]:
        expected = [max(1, ref(k * 0.15)) for k in range(600)]
        assert masking.num_to_predict(n, MaskSpec(rounding=rounding)).tolist() == expected
    count = masking.num_to_predict
    assert count(torch.tensor(30), MaskSpec()) == 5 and count(torch.tensor(30), MaskSpec(rounding="half_even")) == 4
    assert count(torch.tensor([512, 1000]), MaskSpec(max_predictions=80)).tolist() == [77, 80]
    assert count(torch.tensor([1000]), MaskSpec(max_predictions=20)).tolist() == [20]
    with pytest.raises(TypeError, match="integer tensor of token counts"):
        count(30, MaskSpec())


def test_fixed_counts_equal_the_original_port():
    rng = random.Random(0)
    vocab = ["[PAD]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)]
    rows = [["[CLS]"] + [f"w{rng.randrange(40)}" for _ in range(rng.randrange(1, 60))] + ["[SEP]"] for _ in range(300)]
    ref_counts = [len(mask_checks.reference_original_masking(r, vocab_words=vocab, rng=rng)[1]) for r in rows]
    length = max(map(len, rows))
    ids = torch.tensor([[vocab.index(t) for t in r] + [0] * (length - len(r)) for r in rows])
    out = mask_tokens(ids, MaskSpec(mask_scheme="fixed", max_predictions=20), TokenIds(3, (0, 1, 2, 3), len(vocab)),
                      attention_mask=ids != 0, generator=torch.Generator().manual_seed(0))
    assert out.selected.sum(1).tolist() == ref_counts


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=12), min_size=1, max_size=6), st.integers(0, 12), st.randoms())
def test_greedy_fill_equals_the_original_loop(rows, budget, rnd):
    width = max(map(len, rows))
    lengths = torch.tensor([r + [0] * (width - len(r)) for r in rows]).reshape(len(rows), width)
    got = whole_word._greedy_fill(lengths, torch.full((len(rows),), budget))
    for row, accepted in zip(rows, got.tolist(), strict=True):
        used, want = 0, []
        for length in row:  # the original: skip a word that overflows the budget, keep trying later ones
            ok = length > 0 and used + length <= budget
            used += length if ok else 0
            want.append(ok)
        assert accepted[: len(row)] == want


def test_original_port_whole_word_keeps_pieces_together():
    rng = random.Random(1)
    tokens = ["[CLS]", "un", "##aff", "##able", "is", "a", "word", "##piece", "[SEP]"]
    for _ in range(200):
        out, positions, labels = mask_checks.reference_original_masking(
            tokens, vocab_words=tokens, rng=rng, masked_lm_prob=0.5, do_whole_word_mask=True
        )
        chosen = set(positions)
        assert 0 not in chosen and 8 not in chosen
        assert len({1, 2, 3} & chosen) in (0, 3) and len({6, 7} & chosen) in (0, 2)
        assert labels == [tokens[i] for i in positions]


# ---- invariants (hypothesis) --------------------------------------------------------------------------------

MIXES = [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.5, 0.3, 0.2)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 6), length=st.integers(1, 40), seed=st.integers(0, 2**31 - 1),
    rate=st.floats(0, 1), scheme=st.sampled_from(["bernoulli", "fixed"]), mix=st.sampled_from(MIXES),
    special_share=st.floats(0, 0.6), unit=st.sampled_from([None, "continuation", "word_ids"]),
    max_predictions=st.sampled_from([None, 1, 3]),
)
def test_invariants(rows, length, seed, rate, scheme, mix, special_share, unit, max_predictions):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, TOY_VOCAB, (rows, length), generator=g)
    specials = torch.rand(rows, length, generator=g) < special_share
    ids[specials] = torch.randint(1, 5, (int(specials.sum()),), generator=g)
    lens = torch.randint(0, length + 1, (rows,), generator=g)
    att = (torch.arange(length)[None, :] < lens[:, None]).long()
    ids[att == 0] = PAD
    cont = torch.rand(rows, length, generator=g) < 0.4
    word_ids = torch.cumsum(~cont, 1) * att - (1 - att)  # runs share an id; -1 on padding
    words = {"continuation": cont} if unit == "continuation" else {"word_ids": word_ids} if unit else None
    before = (ids.clone(), att.clone(), cont.clone())
    maskable = (att == 1) & (ids >= 5)

    def run():
        spec = MaskSpec(mask_rate=rate, mask_scheme=scheme, mask_mix=mix, max_predictions=max_predictions,
                        whole_word=bool(unit))
        starts = None if words is None else whole_word.word_starts(**words)
        return toy_mask(ids, att, spec, word_starts=starts, generator=torch.Generator().manual_seed(seed))

    if not maskable.any():
        with pytest.raises(ValueError, match="no token of this batch may be masked"):
            run()
        return
    out = run()
    sel = out.selected
    assert torch.equal(ids, before[0]) and torch.equal(att, before[1]) and torch.equal(cont, before[2])
    assert torch.equal(out.maskable, maskable)
    assert not (sel & ~maskable).any(), "selected a special token or padding"
    assert torch.equal(out.labels, torch.where(sel, ids, -100))
    assert torch.equal(out.input_ids[~sel], ids[~sel]), "an unselected input changed"
    assert (out.input_ids[out.action == MASKED] == MASK).all()
    assert torch.equal(out.input_ids[out.action == KEPT], ids[out.action == KEPT])
    assert (out.input_ids[out.action == RANDOM] >= 5).all()
    if mix[0] == 1:
        assert (out.action[sel] == MASKED).all()
    assert torch.equal(out.action == NOT_SELECTED, ~sel)
    if unit:
        starts = maskable_words(maskable, cont)
        word = torch.cumsum(starts.flatten(), 0).reshape(ids.shape)
        for w in word[maskable].unique():
            members = sel[(word == w) & maskable]
            assert members.all() or not members.any(), "a word was split"
    if scheme == "fixed":
        k = torch.minimum(masking.num_to_predict(att.sum(1), MaskSpec(mask_rate=rate, max_predictions=max_predictions)),
                          maskable.sum(1))
        if unit:
            assert (sel.sum(1) <= k).all()
        else:
            assert torch.equal(sel.sum(1), k)
    again = run()
    assert torch.equal(again.input_ids, out.input_ids) and torch.equal(again.labels, out.labels)


# ---- documented behaviours ----------------------------------------------------------------------------------


def test_documented_edge_behaviours():
    ids = torch.tensor([[CLS, 7, 8, 9, SEP], [CLS, SEP, PAD, PAD, PAD]])
    att = (ids != PAD).long()
    g = torch.Generator().manual_seed(0)
    out = toy_mask(ids, att, MaskSpec(mask_rate=1.0), generator=g)  # row 2 has nothing maskable: left alone
    assert out.selected[0, 1:4].all() and not out.selected[1].any() and (out.labels[1] == -100).all()
    assert not toy_mask(ids, att, MaskSpec(mask_rate=0.0), generator=g).selected.any()
    # fixed count keeps the original's max(1, …): rate 0 still predicts one token per row
    fixed = MaskSpec(mask_rate=0.0, mask_scheme="fixed")
    assert toy_mask(ids, att, fixed, generator=g).selected.sum(1).tolist() == [1, 0]
    # asking for more than the row holds takes every maskable token
    fixed = MaskSpec(mask_rate=1.0, mask_scheme="fixed")
    assert toy_mask(ids, att, fixed, generator=g).selected.sum(1).tolist() == [3, 0]
    one = toy_mask(torch.tensor([[CLS, 7, 8, SEP]]), None, MaskSpec(mask_rate=1.0), generator=g)  # one sequence
    assert one.input_ids.shape == (1, 4) and one.selected.tolist() == [[False, True, True, False]]


def test_determinism_and_fresh_draws():
    ids, att = toy_batch(64, 32, seed=11)
    a = toy_mask(ids, att, generator=torch.Generator().manual_seed(1))
    b = toy_mask(ids, att, generator=torch.Generator().manual_seed(1))
    c = toy_mask(ids, att, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.labels, c.labels)


def test_static_vs_dynamic_distinct_masks():
    ids, att = toy_batch(8, 64, seed=12, min_len=64)
    static = masking.epoch_masks(ids, MaskSpec(), TOY_TOKENS, epochs=7, static_copies=3, attention_mask=att,
                                 generator=torch.Generator().manual_seed(0))
    dynamic = masking.epoch_masks(ids, MaskSpec(), TOY_TOKENS, epochs=7, attention_mask=att,
                                  generator=torch.Generator().manual_seed(0))
    assert static[0] is static[3] is static[6]
    assert mask_checks.count_distinct_masks(static).tolist() == [3] * 8
    assert mask_checks.count_distinct_masks(dynamic).tolist() == [7] * 8


def test_select_and_replace_compose_to_mask_tokens():
    ids, att = toy_batch(16, 20, seed=13)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    full = toy_mask(ids, att, generator=g1)
    maskable = (att == 1) & (ids >= 5)
    sel = masking.select_positions(maskable, MaskSpec(), generator=g2, n_tokens=att.sum(1))
    new, labels, action = masking.apply_replacement(ids, sel, MaskSpec(), TOY_TOKENS, generator=g2)
    assert torch.equal(new, full.input_ids) and torch.equal(labels, full.labels) and torch.equal(action, full.action)


def test_word_starts_from_a_real_tokenizer(bert_tok):
    enc = bert_tok("unaffable tokenization works", return_special_tokens_mask=True)
    ids = torch.tensor([enc["input_ids"]])
    maskable = torch.tensor([enc["special_tokens_mask"]]) == 0
    by_ids = whole_word.word_starts(word_ids=torch.tensor([[-1 if w is None else w for w in enc.word_ids()]]))
    by_hash = whole_word.word_starts(continuation=whole_word.continuation_lookup(bert_tok)[ids])
    pieces = bert_tok.convert_ids_to_tokens(enc["input_ids"])
    assert torch.equal(by_ids, by_hash)
    by_ids &= maskable
    assert [p for p, s in zip(pieces, by_ids[0].tolist(), strict=True) if s] == [p for p in pieces if p[0].isalpha()]


# ---- the same seed gives the same masks as before -------------------------------------------------------------

PINNED_IDS = torch.tensor([[1, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 2],
                           [1, 21, 22, 23, 24, 25, 26, 2, 0, 0, 0, 0],
                           [1, 31, 32, 33, 2, 0, 0, 0, 0, 0, 0, 0]])
_ = IGNORE_INDEX  # short, to keep the pinned labels readable
# Outputs of the implementation before the MaskSpec refactor (seed 0), stored: a refactor must not change any mask.
PINNED = {
    "bernoulli": (MaskSpec(mask_rate=0.4), [[1, 11, 3, 3, 3, 15, 16, 17, 18, 19, 20, 2], [1, 3, 30, 23, 24, 25, 23, 2, 0, 0, 0, 0],
                                       [1, 31, 32, 3, 2, 0, 0, 0, 0, 0, 0, 0]],
                  [[_, _, 12, 13, 14, _, _, _, _, _, 20, _], [_, 21, 22, _, _, _, 26, _, _, _, _, _],
                   [_, _, _, 33, _, _, _, _, _, _, _, _]]),
    "fixed": (MaskSpec(mask_rate=0.4, mask_scheme="fixed", max_predictions=4),
              [[1, 11, 12, 13, 3, 15, 16, 3, 18, 19, 22, 2], [1, 21, 3, 3, 3, 25, 26, 2, 0, 0, 0, 0],
               [1, 3, 3, 33, 2, 0, 0, 0, 0, 0, 0, 0]],
              [[_, _, _, 13, 14, _, _, 17, _, _, 20, _], [_, _, 22, 23, 24, _, _, _, _, _, _, _],
               [_, 31, 32, _, _, _, _, _, _, _, _, _]]),
    "whole_word_fixed": (MaskSpec(mask_rate=0.4, mask_scheme="fixed", whole_word=True),
                         [[1, 3, 12, 13, 14, 15, 3, 3, 6, 19, 20, 2], [1, 21, 22, 3, 3, 3, 26, 2, 0, 0, 0, 0],
                          [1, 3, 40, 33, 2, 0, 0, 0, 0, 0, 0, 0]],
                         [[_, 11, _, _, _, _, 16, 17, 18, 19, _, _], [_, _, _, 23, 24, 25, _, _, _, _, _, _],
                          [_, 31, 32, _, _, _, _, _, _, _, _, _]]),
}


@pytest.mark.parametrize("name", list(PINNED))
def test_same_seed_gives_the_stored_masks(name):
    spec, want_ids, want_labels = PINNED[name]
    cont = torch.zeros_like(PINNED_IDS, dtype=torch.bool)
    cont[0, [3, 4, 8]] = cont[1, 2] = True  # words: 12 ##13 ##14, 17 ##18; 21 ##22
    starts = starts_of(cont) if spec.whole_word else None
    out = toy_mask(PINNED_IDS, PINNED_IDS != PAD, spec, word_starts=starts, generator=torch.Generator().manual_seed(0))
    assert out.input_ids.tolist() == want_ids and out.labels.tolist() == want_labels
    if spec.mask_scheme == "fixed":  # the original count: round(0.4 · 12) = 5 (or the cap, 4), round(3.2) = 3, 0.4 · 5 = 2
        assert out.selected.sum(1).tolist() == ([4, 3, 2] if spec.max_predictions else [5, 3, 2])


def test_ignore_index_is_what_pytorch_ignores():
    assert torch.nn.CrossEntropyLoss().ignore_index == IGNORE_INDEX


# ---- the specification and the token ids --------------------------------------------------------------------


def test_mask_spec_is_validated_once_and_shared():
    spec = MaskSpec(mask_rate=0.3, mask_mix=[1, 0, 0])
    assert spec.mask_mix == (1.0, 0.0, 0.0) and isinstance(spec.mask_rate, float)  # normalised when made
    assert pretraining.MaskSpec is MaskSpec  # pretraining takes the same spec
    for bad, message in [({"mask_rate": 2}, r"mask_rate=2 is not a probability: pass a number in"),
                         ({"mask_scheme": "topk"}, "mask_scheme='topk' is not known"),
                         ({"rounding": "up"}, "rounding='up' is not known"),
                         ({"random_from": "all"}, "random_from='all'"), ({"max_predictions": 0}, "max_predictions=0"),
                         ({"max_predictions": 2.5}, "max_predictions=2.5"), ({"whole_word": "yes"}, "whole_word='yes'")]:
        with pytest.raises(ValueError, match=message):
            MaskSpec(**bad)
    with pytest.raises(TypeError, match="spec must be a MaskSpec"):
        mask_tokens(PINNED_IDS, {"mask_rate": 0.3}, TOY_TOKENS)
    with pytest.raises(TypeError, match="tokens must be a TokenIds"):
        mask_tokens(PINNED_IDS, spec, {"mask_token_id": MASK})


def test_token_ids_of_a_tokenizer_and_their_checks(bert_tok, toy_tok):
    tokens = TokenIds.of(bert_tok)
    assert (tokens.mask_token_id, tokens.vocab_size) == (103, 30522)
    assert sorted(tokens.special_ids) == [0, 100, 101, 102, 103]
    toy = TokenIds.of(toy_tok)
    assert (toy.mask_token_id, sorted(toy.special_ids), toy.vocab_size) == (MASK, TOY_SPECIALS, TOY_VOCAB)
    assert TokenIds(3, range(5), 10).special_ids == (0, 1, 2, 3, 4)  # normalised to a tuple of ints
    for bad, message in [((3, (0, 3), 0), "vocab_size=0 must be a positive integer"),
                         ((3, (0, 3, 10), 10), r"special_ids=\(0, 3, 10\) must be ids in \[0, 10\)"),
                         ((3, "0123", 10), "special_ids='0123'"), ((3, 3, 10), "special_ids=3 must be ids"),
                         ((3, (0, 1), 10), "mask_token_id=3 must be one of special_ids"),
                         ((None, (0, 1), 10), "mask_token_id=None")]:
        with pytest.raises(ValueError, match=message):
            TokenIds(*bad)
    no_mask = type("NoMask", (), {"mask_token_id": None, "all_special_ids": [0], "__len__": lambda self: 5})()
    with pytest.raises(ValueError, match="this tokenizer has no mask token"):
        TokenIds.of(no_mask)


def test_the_collator_draws_the_masks_of_mask_tokens(toy_tok):
    ids, att = toy_batch(32, 24, seed=14)
    width = int(att.sum(1).max())  # the collator pads to the longest row: compare on the same shape
    ids, att = ids[:, :width], att[:, :width]
    spec = MaskSpec(mask_rate=0.3, mask_scheme="fixed", mask_mix=(0.5, 0.3, 0.2), max_predictions=5,
                    rounding="half_even")
    by_spec = toy_mask(ids, att, spec, generator=torch.Generator().manual_seed(4))
    rows = [r[a == 1] for r, a in zip(ids, att, strict=True)]
    collated = MLMCollator(toy_tok, spec, generator=torch.Generator().manual_seed(4))(rows)
    assert torch.equal(collated["labels"], by_spec.labels) and torch.equal(collated["input_ids"], by_spec.input_ids)


def test_whole_word_needs_words_and_words_need_whole_word():
    ids, att = toy_batch(2, 8, seed=0)
    with pytest.raises(ValueError, match="whole_word=True needs the words"):
        toy_mask(ids, att, MaskSpec(whole_word=True))
    with pytest.raises(ValueError, match="whole_word is False"):
        toy_mask(ids, att, word_starts=torch.zeros_like(ids, dtype=torch.bool))


def test_a_mix_without_unchanged_share_leaves_no_selected_token_unchanged():
    ids, att = toy_batch(500, 32, seed=15)
    out = toy_mask(ids, att, MaskSpec(mask_rate=1.0, mask_mix=(0.7, 0.3, 0.0)), generator=torch.Generator().manual_seed(0))
    assert not (out.action == KEPT).any() and (out.action[out.selected] != NOT_SELECTED).all()
    in_binom_interval(int((out.action == MASKED).sum()), int(out.selected.sum()), 0.7, "[MASK] share")


# ---- agreement with transformers ----------------------------------------------------------------------------


def test_distribution_agrees_with_transformers_collator(bert_tok):
    g = torch.Generator().manual_seed(20)
    lens = torch.randint(8, 128, (3000,), generator=g).tolist()
    body = torch.randint(1000, 30_000, (sum(lens),), generator=g).split(lens)
    examples = [{"input_ids": [101, *b.tolist(), 102]} for b in body]
    theirs = DataCollatorForLanguageModeling(bert_tok, mlm_probability=0.15, seed=1)(examples)  # independent draws
    ours = MLMCollator(bert_tok, seed=0)(examples)
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
    for name, out in [("ours", ours), ("transformers", theirs)]:
        ids_in = torch.where(out["labels"] != -100, out["labels"], out["input_ids"])
        special = torch.isin(ids_in, torch.tensor(bert_tok.all_special_ids))
        sel = out["labels"] != -100
        assert not (sel & special).any(), f"{name} selected a special token"
        n_maskable, n_sel = int((~special).sum()), int(sel.sum())
        in_binom_interval(n_sel, n_maskable, 0.15, f"{name} selection rate")
        in_binom_interval(int((out["input_ids"][sel] == 103).sum()), n_sel, 0.8, f"{name} [MASK] share")
        in_binom_interval(int((out["input_ids"][sel] == out["labels"][sel]).sum()), n_sel,
                          0.1 + 0.1 / len(bert_tok), f"{name} unchanged share")
        assert torch.equal(out["input_ids"][~sel], ids_in[~sel]), f"{name} changed an unselected input"
    a, b = int((ours["labels"] != -100).sum()), int((theirs["labels"] != -100).sum())
    n = int(ours["attention_mask"].sum()) - 2 * len(examples)
    z = (a - b) / (2 * n * 0.15 * 0.85) ** 0.5
    assert abs(z) < 3.29, f"selection counts {a} vs {b} differ by z = {z:.2f} (99.9 % bound 3.29)"


# ---- the collator -------------------------------------------------------------------------------------------


def test_collator_pads_and_passes_fields(bert_tok):
    examples = [
        {"input_ids": [101, 2023, 2003, 102], "token_type_ids": [0, 0, 0, 0], "special_tokens_mask": [1, 0, 1, 1]},
        {"input_ids": torch.tensor([101, 7592, 102]), "token_type_ids": [0, 0, 0], "special_tokens_mask": [1, 0, 1]},
    ]
    snapshot = [dict(e) for e in examples]
    out = MLMCollator(bert_tok, MaskSpec(mask_rate=1.0), pad_to_multiple_of=8, seed=0)(examples)
    assert set(out) == {"input_ids", "attention_mask", "labels", "token_type_ids"}
    assert out["input_ids"].shape == (2, 8) and out["input_ids"].dtype == torch.long
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]]
    assert (out["input_ids"][:, 4:] == 0).all() and (out["token_type_ids"] == 0).all()
    # special_tokens_mask from the example is honoured: 2003 ("is") was marked special, so only 2023 / 7592 masked
    assert (out["labels"] != -100).tolist() == [[False, True] + [False] * 6, [False, True] + [False] * 6]
    assert all(e["input_ids"] is s["input_ids"] for e, s in zip(examples, snapshot, strict=True))
    assert examples[1]["input_ids"].tolist() == [101, 7592, 102]


def test_collator_whole_word_from_word_ids_and_from_hashes(bert_tok):
    enc = bert_tok(["unaffable tokenization", "a wordpiece embedding"])
    examples = [{"input_ids": ids, "word_ids": enc.word_ids(i)} for i, ids in enumerate(enc["input_ids"])]
    for collator in [MLMCollator(bert_tok, MaskSpec(whole_word=True, mask_rate=0.5), seed=1),
                     MLMCollator(bert_tok, MaskSpec(whole_word=True, mask_rate=0.5, mask_scheme="fixed"), seed=1)]:
        for _ in range(20):
            for batch_examples in (examples, [{"input_ids": e["input_ids"]} for e in examples]):
                out = collator(batch_examples)
                sel = out["labels"] != -100
                for i in range(2):
                    groups = {}
                    for pos, w in enumerate(enc.word_ids(i)):
                        if w is not None:
                            groups.setdefault(w, []).append(bool(sel[i, pos]))
                    assert all(all(v) or not any(v) for v in groups.values()), groups


def test_collator_seed_and_generator_are_reproducible(bert_tok):
    examples = [[101, *range(2000, 2040), 102]] * 4
    a, b = MLMCollator(bert_tok, seed=3), MLMCollator(bert_tok, seed=3)
    first_a, first_b = a(examples), b(examples)
    assert torch.equal(first_a["labels"], first_b["labels"])
    assert not torch.equal(first_a["labels"], a(examples)["labels"]), "a second batch must get fresh masks"
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert torch.equal(MLMCollator(bert_tok, generator=g1)(examples)["input_ids"],
                       MLMCollator(bert_tok, generator=g2)(examples)["input_ids"])


def test_collator_on_a_toy_vocabulary(toy_tok):
    collate = MLMCollator(toy_tok, MaskSpec(mask_rate=1.0, mask_mix=(1, 0, 0)), seed=0)
    out = collate([[CLS, 9, 9, SEP], [CLS, 7, SEP]])
    assert out["input_ids"].tolist() == [[CLS, MASK, MASK, SEP], [CLS, MASK, SEP, PAD]]
    assert out["labels"].tolist() == [[-100, 9, 9, -100], [-100, 7, -100, -100]]


def test_collator_trains_a_tiny_bert_with_transformers_trainer(bert_tok, tmp_path):
    """In place of DataCollatorForLanguageModeling: transformers' Trainer and BertForMaskedLM (its loss from labels)."""
    text = ["the quick brown fox jumps over the lazy dog", "masked language models predict hidden words"] * 8
    dataset = [dict(e) for e in (bert_tok(t) for t in text)]
    dataset = [{k: e[k] for k in ("input_ids", "attention_mask", "token_type_ids")} for e in dataset]
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, report_to=[],
                             use_cpu=True, save_strategy="no", disable_tqdm=True, logging_strategy="no")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(bert_tok), hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))
    trainer = Trainer(model=model, args=args, train_dataset=dataset,
                      data_collator=MLMCollator(bert_tok, MaskSpec(whole_word=True, mask_rate=0.3), seed=0))
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))


# ---- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [1.5, -0.1, float("nan"), "0.15", True])
def test_bad_rate(rate):
    with pytest.raises(ValueError, match=r"mask_rate=.* is not a probability: pass a number in \[0, 1\]"):
        MaskSpec(mask_rate=rate)


@pytest.mark.parametrize(("mix", "message"), [
    ((0.8, 0.1, 0.2), "sums to 1.1, not 1"), ((0.8, 0.2), "has 2 entries"), ((1.2, -0.1, -0.1), "negative"),
    ("abc", "must be three numbers"),
])
def test_bad_mix(mix, message):
    with pytest.raises(ValueError, match=f"mask_mix=.* {message}"):
        MaskSpec(mask_mix=mix)


def test_bad_inputs_say_what_to_change(bert_tok):
    ids, att = toy_batch(2, 8, seed=0)
    with pytest.raises(ValueError, match="no token of this batch may be masked"):
        toy_mask(torch.tensor([[CLS, SEP, PAD], [CLS, SEP, PAD]]), None)
    with pytest.raises(TypeError, match="integer token ids"):
        toy_mask(ids.float(), att)
    with pytest.raises(TypeError, match=r"must be a torch.Tensor \(batch, length\), got list"):
        toy_mask(ids.tolist(), att)
    with pytest.raises(ValueError, match=r"must be 2-D \(batch, length\), got shape \(8,\): for one sequence"):
        toy_mask(ids[0], None)
    with pytest.raises(ValueError, match="input_ids is empty"):
        toy_mask(torch.zeros(0, 5, dtype=torch.long), None)
    with pytest.raises(ValueError, match="vocab_size=50"):
        toy_mask(ids + 100, att)
    with pytest.raises(ValueError, match=r"attention_mask must be a tensor shaped like input_ids \(2, 8\)"):
        toy_mask(ids, att[:, :3])
    with pytest.raises(ValueError, match=r"word_starts must be a tensor shaped like input_ids \(2, 8\)"):
        toy_mask(ids, att, MaskSpec(whole_word=True), word_starts=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="integer token ids"):
        MLMCollator(bert_tok)([[101.0, 2000.5, 102.0]])
    with pytest.raises(TypeError, match="integer token ids"):
        MLMCollator(bert_tok)([[True, False], [True]])
    with pytest.raises(ValueError, match="batch is empty"):
        MLMCollator(bert_tok)([])
    with pytest.raises(ValueError, match="'input_ids' entry"):
        MLMCollator(bert_tok)([{"ids": [101, 102]}])
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        MLMCollator(bert_tok, pad_to_multiple_of=0)
    with pytest.raises(TypeError, match="spec must be a MaskSpec"):
        MLMCollator(bert_tok, {"mask_rate": 0.3})
    with pytest.raises(ValueError, match="static_copies=0"):
        masking.epoch_masks(ids, MaskSpec(), TOY_TOKENS, epochs=3, static_copies=0)
    with pytest.raises(ValueError, match="epochs=0"):
        masking.epoch_masks(ids, MaskSpec(), TOY_TOKENS, epochs=0)
