"""Whole-word masking of the character BERT's training blocks (notebook 10): the word-start map of packed blocks by
hand, whole words selected whole in training batches, and the paired comparison of two predictors, by hand and on
the shipped model."""

import pytest
import torch

from mlm_course import chinese, masking, models, pretraining
from mlm_course.chinese import Guesses
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain, seeded_batches


@pytest.fixture(scope="module")
def tok():
    return chinese.char_tokenizer()


@pytest.fixture(scope="module")
def poem_blocks(tok):
    texts = [p.text for p in chinese.corpus.chinese_poems("heldout")][:40]
    return pretraining.pack_blocks(texts, tok, 32), chinese.pack_word_starts(texts, tok, 32)


# ---- the word-start map of packed blocks -----------------------------------------------------------------------------


def test_word_starts_of_packed_blocks_by_hand(tok):
    # jieba: 床前 / 明月光 / ，  and  低头 / 思 / 故乡; blocks of 4 characters between [CLS] and [SEP]
    texts = ["床前明月光，", "低头思故乡"]
    starts = chinese.pack_word_starts(texts, tok, 6)
    blocks = pretraining.pack_blocks(texts, tok, 6)
    assert starts.shape == blocks.shape == (2, 6) and starts.dtype == torch.bool
    assert starts.int().tolist() == [[1, 1, 0, 1, 0, 1],   # [CLS] 床 前 明 月 [SEP]
                                     [1, 1, 1, 1, 0, 1]]   # [CLS] 光 ， 低 头 [SEP]: the cut 明月光 begins again
    # the same word in two texts is two words
    assert chinese.pack_word_starts(["明月", "明月"], tok, 6).int().tolist() == [[1, 1, 0, 1, 0, 1]]


def test_word_starts_of_packed_blocks_refuse_too_little_text(tok):
    with pytest.raises(ValueError, match="fewer than one block"):
        chinese.pack_word_starts(["床前"], tok, 6)
    with pytest.raises(ValueError, match="non-empty list"):
        chinese.pack_word_starts("床前明月光", tok, 6)


def _words_whole(selected: torch.Tensor, starts: torch.Tensor, maskable: torch.Tensor) -> bool:
    """Every run of maskable tokens between word starts is selected all or nothing."""
    for row in range(selected.shape[0]):
        word, chosen = [], []
        for i in range(selected.shape[1]):
            if starts[row, i] or not maskable[row, i]:
                chosen.append(word)
                word = []
            if maskable[row, i]:
                word.append(bool(selected[row, i]))
        chosen.append(word)
        if any(len(set(w)) > 1 for w in chosen):
            return False
    return True


def test_mask_blocks_selects_whole_words(tok, poem_blocks):
    blocks, starts = poem_blocks
    spec = masking.MaskSpec(mask_rate=0.3, whole_word=True)
    batch = pretraining.mask_blocks(blocks, tok, spec, torch.Generator().manual_seed(0), word_starts=starts)
    selected = batch["labels"] != masking.IGNORE_INDEX
    maskable = (blocks != tok.cls_token_id) & (blocks != tok.sep_token_id) & (blocks != tok.unk_token_id)
    assert selected.any() and _words_whole(selected, starts, maskable)
    token_level = pretraining.mask_blocks(blocks, tok, masking.MaskSpec(mask_rate=0.3), torch.Generator().manual_seed(0))
    assert not _words_whole(token_level["labels"] != masking.IGNORE_INDEX, starts, maskable)  # the test can fail


def _config(**changes):
    settings = {"seq_len": 32, "batch_size": 8, "steps": 3, "short_seq_prob": 0.5, "eval_every": 3, "save_every": 3,
                "minutes": None}
    return PretrainConfig(**settings | changes)


def test_seeded_batches_with_word_starts_mask_whole_words_and_cut_words_at_short_sequences(tok, poem_blocks):
    blocks, starts = poem_blocks
    batch_for_step = seeded_batches(blocks, tok, _config(mask_rate=0.4), slots=1, word_starts=starts)
    cut = 0
    for step in (1, 2, 3):
        batch = batch_for_step(step, 0)
        selected = batch["labels"] != masking.IGNORE_INDEX
        originals = torch.where(selected, batch["labels"], batch["input_ids"])  # the rows before replacement
        maskable = (batch["attention_mask"] == 1) & ~torch.isin(originals, torch.tensor(tok.all_special_ids))
        assert selected.any()
        for row in range(len(originals)):
            source = _source_block(originals[row], blocks)  # a short sequence keeps a prefix of its block
            cut += int(batch["attention_mask"][row].sum()) < blocks.shape[1]
            assert _words_whole(selected[row : row + 1], starts[source][None], maskable[row : row + 1])
    assert cut > 0  # short sequences were among them


def _source_block(row: torch.Tensor, blocks: torch.Tensor) -> int:
    """The block whose tokens begin as ``row``'s do, up to its [SEP]."""
    length = int((row != 0).sum()) - 1
    (match,) = [i for i in range(len(blocks)) if torch.equal(blocks[i, :length], row[:length])]
    return match


def test_every_token_a_word_gives_the_token_level_masks(tok, poem_blocks):
    # Bernoulli per word with one-token words is Bernoulli per token, drawn from the same numbers
    blocks, _ = poem_blocks
    config = _config()
    words = seeded_batches(blocks, tok, config, slots=1, word_starts=torch.ones_like(blocks, dtype=torch.bool))
    tokens = seeded_batches(blocks, tok, config, slots=1)
    for step in (1, 2):
        one, other = words(step, 0), tokens(step, 0)
        assert all(torch.equal(one[key], other[key]) for key in other)


def test_seeded_batches_refuse_a_word_map_of_another_shape(tok, poem_blocks):
    blocks, starts = poem_blocks
    with pytest.raises(ValueError, match="one entry per token"):
        seeded_batches(blocks, tok, _config(), slots=1, word_starts=starts[:, :-1])


def test_pretrain_trains_with_whole_word_masks(tok, poem_blocks):
    blocks, starts = poem_blocks
    torch.manual_seed(0)
    model = models.build_model("tiny", tok, seed=0, max_positions=32, dropout=0.0)
    result = pretrain(model, tok, blocks, None, _config(steps=2), word_starts=starts)
    assert result.steps == 2


# ---- two predictors on the same positions ----------------------------------------------------------------------------


def test_paired_scores_by_hand():
    truth = list("abcdefgh")
    first = Guesses(truth, [["x", c] for c in "abcdef"] + [["g"], ["h"]])  # top-1 right at 2 positions, top-5 at 8
    second = Guesses(truth, [[c] for c in truth])  # right everywhere
    out = chinese.paired_scores({"one": first, "two": second})
    assert out["positions"] == 8
    assert out["one"] == {"top1_hits": 2, "top5_hits": 8, "top1": 0.25, "top5": 1.0}
    assert out["two"]["top1_hits"] == 8
    # 6 discordant pairs, all for the second: two-sided exact binomial p = 2 · 0.5⁶
    assert out["mcnemar"] == {"only_a": 0, "only_b": 6, "n": 8, "p": pytest.approx(2 * 0.5**6)}
    with pytest.raises(ValueError, match="same positions"):
        chinese.paired_scores({"one": first, "two": Guesses(truth[::-1], second.top)})
    with pytest.raises(ValueError, match="two predictors"):
        chinese.paired_scores({"one": first})


def test_word_units_are_the_characters_of_multi_character_words():
    # 床前 / 明月光 / ， / 疑是 / 地上 / 霜 / 。
    units = chinese.word_units(["床前明月光，疑是地上霜。"])
    assert [u.position for u in units] == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert [u.hidden for u in units] == [(0, 1)] * 2 + [(2, 3, 4)] * 3 + [(6, 7)] * 2 + [(8, 9)] * 2


def test_compare_models_pairs_two_models_on_the_same_units(tok):
    model, _ = models.load_mlm(str(chinese.corpus.chinese_model_dir()))
    lines = ["床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"]
    same = chinese.compare_models(model, model, tok, lines, chinese.word_units(lines), ("a", "b"))
    assert same["positions"] == 9 + 9  # 举头 / 望明月 / ， / 低头 / 思 / 故乡: 9 characters in words of 2+
    assert same["a"] == same["b"] and same["mcnemar"] == {"only_a": 0, "only_b": 0, "n": 18, "p": 1.0}
    fresh = models.build_model("tiny", tok, seed=3, max_positions=32, dropout=0.0).eval()
    alone = chinese.compare_models(model, fresh, tok, lines, chinese.mask_units(lines, "character"))
    assert alone["positions"] == 20 and set(alone) == {"positions", "first", "second", "mcnemar"}
    test = alone["mcnemar"]
    assert test["only_a"] - test["only_b"] == alone["first"]["top1_hits"] - alone["second"]["top1_hits"]
    with pytest.raises(ValueError, match="two different names"):
        chinese.compare_models(model, model, tok, lines, chinese.word_units(lines), ("a", "a"))
