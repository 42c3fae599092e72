"""Masked language modelling in Chinese, notebook 10: characters as tokens, jieba words as the unit of masking.

Chinese is written without spaces, so a BERT tokenizer cannot split it into words first:

1. **BERT isolates every CJK character.** bert-base-uncased's basic tokenizer puts spaces around each character of
   the CJK ideograph blocks (:func:`is_cjk`) before WordPiece, so a Chinese character is one word of one character:
   it becomes its own token if the vocabulary has it and ``[UNK]`` otherwise (:func:`vocab_coverage`). Google's
   Chinese BERT did the same with a vocabulary of ≈ 21 k entries, most of them single characters.
2. **A character vocabulary.** :func:`build_char_tokenizer` makes a transformers tokenizer in which every character
   is one token (the five BERT specials first, then the characters of the training text by falling frequency);
   :func:`char_tokenizer` loads the one the course ships with its Chinese BERT.
3. **Words for whole-word masking.** :func:`segment` cuts text into words with jieba's dictionary (the Chinese-BERT-wwm
   recipe, which used LTP); :func:`word_ids` gives each character token its word's number and :func:`encode_words`
   turns a batch of lines into ids plus the word-start map that :func:`mlm_course.masking.mask_tokens` needs for
   ``MaskSpec(whole_word=True)`` (:mod:`mlm_course.whole_word` does the selecting); :func:`pack_word_starts` gives
   the same map for packed training blocks. :func:`word_masks` counts the words a selection took whole, and the
   multi-character ones it left partly visible.
4. **Why character masking is too easy.** :func:`mask_units` masks the characters of held-out lines one at a time
   or a whole word at a time, and :func:`neighbour_guesses` predicts them from the neighbours that stay visible
   with a character bigram model (:class:`mlm_course.ngram.NgramModel` over characters): most characters of a
   word are easy to guess from the other half of the word, a word is much harder to guess from its context.
5. **A character BERT.** :func:`one_masked_per_row` builds batches with one masked character per row, to score a
   model (:func:`mlm_course.pretraining.masked_predictions`) on the same positions as the bigram model;
   :func:`compare_models` scores two BERTs (character-masked and whole-word-masked) on the same positions, a
   character alone or a whole word (:func:`word_units`) hidden, paired (:func:`paired_scores`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from mlm_course import corpus
from mlm_course.masking import IGNORE_INDEX
from mlm_course.ngram import BOS, EOS, NgramModel
from mlm_course.unigram import UNK
from mlm_course.whole_word import word_starts

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""The five BERT specials, ids 0…4 in this order in :func:`build_char_tokenizer`'s vocabulary."""

# the code-point blocks BERT's basic tokenizer treats as Chinese characters (`_is_chinese_char` in BERT's code)
CJK_BLOCKS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


# ---- 1. what bert-base-uncased does with Chinese ------------------------------------------------------------------


def is_cjk(char: str) -> bool:
    """Whether ``char`` is a CJK ideograph, as BERT's basic tokenizer decides (it isolates exactly these)."""
    if not isinstance(char, str) or len(char) != 1:
        raise ValueError(f"is_cjk takes one character, not {char!r}: loop over the characters of a text.")
    return any(low <= ord(char) <= high for low, high in CJK_BLOCKS)


@dataclass(frozen=True)
class Coverage:
    """How many distinct CJK characters of a text a vocabulary has (``known``) and how many running ones it lacks."""

    distinct: int  # distinct CJK characters in the text
    known: int  # of them, those that are one token of the vocabulary
    running: int  # CJK characters in the text, counted with repeats
    running_unknown: int  # of them, those that become [UNK]

    @property
    def unknown_share(self) -> float:
        """Share of the running CJK characters that become [UNK]."""
        return self.running_unknown / self.running


def vocab_coverage(tokenizer: PreTrainedTokenizerBase, text: str) -> Coverage:
    """The CJK characters of ``text`` that ``tokenizer`` keeps and those it turns into [UNK] (one at a time, so
    that no neighbour can change the answer)."""
    counts = Counter(char for char in text if is_cjk(char))
    if not counts:
        raise ValueError("the text holds no CJK character: pass Chinese text, e.g. a poem.")
    pieces = {char: tokenizer.tokenize(char) for char in counts}
    unknown = {char for char, tokens in pieces.items() if tokens == [tokenizer.unk_token]}
    return Coverage(len(counts), len(counts) - len(unknown), sum(counts.values()),
                    sum(counts[char] for char in unknown))


# ---- 2. a character vocabulary --------------------------------------------------------------------------------


def character_counts(texts: Iterable[str]) -> Counter:
    """How often each character occurs in ``texts`` (whitespace left out)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not one string: wrap it as [text].")
    counts = Counter(char for text in texts for char in text if not char.isspace())
    if not counts:
        raise ValueError("texts holds no character: pass at least one non-empty string.")
    return counts


def build_char_tokenizer(texts: Iterable[str], *, min_count: int = 2, max_length: int = 512) -> PreTrainedTokenizerFast:
    """A BERT tokenizer in which every character is a token: the specials (ids 0…4), then every character seen at
    least ``min_count`` times in ``texts``, most frequent first (ties by code point), so the same texts always give
    the same ids. Rarer characters become [UNK]; whitespace separates nothing and is dropped. ``max_length``: the
    longest input (in tokens) of the model it is for."""
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count={min_count!r}: use a whole number ≥ 1 (1 keeps every character seen).")
    counts = character_counts(texts)
    chars = sorted((c for c, n in counts.items() if n >= min_count and c not in SPECIAL_TOKENS),
                   key=lambda c: (-counts[c], ord(c)))
    vocab = {token: i for i, token in enumerate((*SPECIAL_TOKENS, *chars))}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Split(Regex("."), behavior="isolated")])
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_length)


@lru_cache(maxsize=1)
def char_tokenizer() -> PreTrainedTokenizerFast:
    """The character tokenizer shipped with the course's Chinese BERT (built from its training text). Cached."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(corpus.chinese_model_dir()), local_files_only=True)


# ---- 3. words, and the word-start map for whole-word masking -------------------------------------------------------


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict … cost 0.6 seconds" lines in a notebook
    jieba.initialize()
    return jieba


def segment(text: str) -> list[str]:
    """``text`` cut into words by jieba 0.42.1 (its dictionary and HMM for unknown words; deterministic).
    Punctuation marks come out as words of their own; the words joined give ``text`` back."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}.")
    return _jieba().lcut(text)


def _word_numbers(words: Sequence[str], text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """Per token (its character ``offsets`` into ``text``), the number of the word of ``words`` it lies in, −1 for
    a token that covers no character (a special token, padding)."""
    if "".join(words) != text:
        raise ValueError("the words do not spell the text: pass words that joined give exactly the text "
                         "(segment(text) does).")
    word_of_char = [i for i, word in enumerate(words) for _ in word]
    numbers = []
    for start, end in offsets:
        if start == end:
            numbers.append(-1)
        elif word_of_char[start] != word_of_char[end - 1]:
            raise ValueError(f"token {text[start:end]!r} spans two words: use a character tokenizer.")
        else:
            numbers.append(word_of_char[start])
    return numbers


def word_ids(tokenizer: PreTrainedTokenizerBase, text: str, words: Sequence[str] | None = None) -> list[int | None]:
    """For each token of ``text`` (with [CLS] and [SEP]), the number of the word (``words``, default
    :func:`segment`) its characters come from; None for the specials. Found from the tokens' character offsets, so
    it works for any tokenizer whose tokens do not cross word boundaries (a character tokenizer, BERT's on CJK)."""
    words = segment(text) if words is None else list(words)
    offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    return [None if n < 0 else n for n in _word_numbers(words, text, offsets)]


@dataclass(frozen=True)
class EncodedLines:
    """A padded batch of lines: ``input_ids``, ``attention_mask``, and ``word_ids`` (the word number of each token,
    −1 for specials and padding; numbers restart in every row) and ``starts`` (True where a word begins)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    word_ids: torch.Tensor
    starts: torch.Tensor


def encode_words(tokenizer: PreTrainedTokenizerBase, lines: Sequence[str]) -> EncodedLines:
    """Lines → padded ids and jieba's word-start map, ready for ``mask_tokens(..., word_starts=batch.starts)``."""
    if isinstance(lines, str) or not lines:
        raise ValueError("lines must be a non-empty list of strings: wrap one line as [line].")
    encoded = tokenizer(list(lines), padding=True, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded["offset_mapping"].tolist()
    ids = torch.tensor([_word_numbers(segment(line), line, [tuple(pair) for pair in offsets[row]])
                        for row, line in enumerate(lines)])
    return EncodedLines(encoded["input_ids"], encoded["attention_mask"], ids, word_starts(word_ids=ids))


def pack_word_starts(texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, seq_len: int) -> torch.Tensor:
    """The word-start map of :func:`mlm_course.pretraining.pack_blocks`'s blocks of the same ``texts``: bool
    (blocks, ``seq_len``), True where a jieba word (:func:`segment` of each text) begins, and at ``[CLS]`` and
    ``[SEP]``. A word that a block boundary cuts begins again at the start of the next block, as a word that a
    short sequence cuts ends at its ``[SEP]``; pass it to ``pretrain(..., word_starts=...)`` for whole-word masks."""
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings: wrap one text as [text].")
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    numbers, first = [], 0
    for text, offsets in zip(texts, encoded["offset_mapping"], strict=True):
        words = segment(text)
        numbers += [first + n for n in _word_numbers(words, text, [tuple(pair) for pair in offsets])]
        first += len(words)  # word numbers never repeat from one text to the next
    body = seq_len - 2
    n_blocks = len(numbers) // body if seq_len >= 3 else 0
    if n_blocks == 0:
        raise ValueError(f"the texts have {len(numbers)} tokens, fewer than one block of {seq_len} (with [CLS] and "
                         "[SEP], seq_len ≥ 3): give more text or a shorter seq_len.")
    inner = torch.tensor(numbers[: n_blocks * body], dtype=torch.long).view(n_blocks, body)
    edge = torch.full((n_blocks, 1), -1, dtype=torch.long)
    return word_starts(word_ids=torch.cat([edge, inner, edge], dim=1))


@dataclass(frozen=True)
class WordMasks:
    """What a selection did to the words of a batch. ``words``: words whose every token may be masked; ``selected``:
    those selected whole. ``touched``: multi-character words with a token selected; ``partial``: of them, those
    with a token left unselected (visible). ``unmaskable``: words holding a token that is never masked (an [UNK]:
    a special token), left out of the other counts."""

    words: int
    selected: int
    touched: int
    partial: int
    unmaskable: int

    @property
    def partial_share(self) -> float:
        """``partial / touched`` (nan when no multi-character word was touched)."""
        return self.partial / self.touched if self.touched else float("nan")


def word_masks(selected: torch.Tensor, ids: torch.Tensor, maskable: torch.Tensor) -> WordMasks:
    """Count, over a batch, the words (``ids``: word number per token, −1 = none) that ``selected`` (bool, the same
    shape; e.g. ``mask_tokens(...).selected``) selected whole or in part; ``maskable`` (``.maskable``) says which
    tokens could be selected at all."""
    if not selected.shape == ids.shape == maskable.shape:
        raise ValueError(f"selected {tuple(selected.shape)}, ids {tuple(ids.shape)} and maskable "
                         f"{tuple(maskable.shape)} must have the same shape (batch, length).")
    rows = torch.arange(ids.shape[0])[:, None].expand_as(ids)
    real = ids >= 0
    _, word = torch.unique((rows * (int(ids.max()) + 1) + ids)[real], return_inverse=True)  # one per (row, word)
    size = torch.bincount(word)
    hit = torch.bincount(word, weights=selected[real].double(), minlength=len(size))
    ok = torch.bincount(word, weights=maskable[real].double(), minlength=len(size)) == size
    touched = ok & (size > 1) & (hit > 0)
    return WordMasks(int(ok.sum()), int((ok & (hit == size)).sum()), int(touched.sum()),
                     int((touched & (hit < size)).sum()), int((~ok).sum()))


# ---- 4. why character masking is too easy: a bigram model fills the gaps ------------------------------------------


def training_lines() -> list[str]:
    """Every line of every training poem (the text the character BERT and the bigram model learn from)."""
    return [line for poem in corpus.chinese_poems("train") for line in poem.lines]


def heldout_lines() -> list[str]:
    """Every line of the held-out poems (none of them in the training text)."""
    return [line for poem in corpus.chinese_poems("heldout") for line in poem.lines]


@lru_cache(maxsize=1)
def training_bigrams() -> NgramModel:
    """The character bigram model (interpolated Kneser–Ney, D = 0.75) counted from :func:`training_lines`. Cached."""
    return NgramModel(training_lines(), order=2, tokenize=list)


@dataclass(frozen=True)
class MaskedChar:
    """One character to predict: ``position`` in line ``line``, with the characters at ``hidden`` (``position``
    among them) masked; ``word_length`` is the length of its jieba word."""

    line: int
    position: int
    hidden: tuple[int, ...]
    word_length: int


UNITS = ("character", "word")


def mask_units(lines: Sequence[str], unit: str) -> list[MaskedChar]:
    """Every CJK character of ``lines`` as a prediction: ``unit="character"`` hides it alone, ``unit="word"`` hides
    its whole jieba word (punctuation is never predicted)."""
    if unit not in UNITS:
        raise ValueError(f"unit={unit!r}: use 'character' (one character hidden) or 'word' (its whole word hidden).")
    out = []
    for number, line in enumerate(lines):
        start = 0
        for word in segment(line):
            span = tuple(range(start, start + len(word)))
            for position in span:
                if is_cjk(line[position]):
                    out.append(MaskedChar(number, position, span if unit == "word" else (position,), len(word)))
            start += len(word)
    return out


@dataclass(frozen=True)
class Guesses:
    """Predictions at some masked characters: the true ``truth`` and the ``top`` k guesses, best first."""

    truth: list[str]
    top: list[list[str]]

    def hits(self, k: int = 1) -> list[bool]:
        """Per prediction: is the true character among the first ``k`` guesses?"""
        return [answer in guesses[:k] for answer, guesses in zip(self.truth, self.top, strict=True)]


def neighbour_guesses(model: NgramModel, lines: Sequence[str], units: Sequence[MaskedChar], k: int = 5) -> Guesses:
    """The bigram model's ``k`` best characters at each unit, from the neighbours that stay visible (a line's
    edges count as visible): :meth:`~mlm_course.ngram.NgramModel.neighbour_log_scores`."""
    ruled_out = np.isin(np.array(model.candidates, dtype=object), [EOS, UNK, BOS])
    top, truth = [], []
    for unit in units:
        line = lines[unit.line]
        left, right = unit.position - 1, unit.position + 1
        left_token = None if left in unit.hidden else (BOS if left < 0 else line[left])
        right_token = None if right in unit.hidden else (EOS if right >= len(line) else line[right])
        scores = np.where(ruled_out, -np.inf, model.neighbour_log_scores(left_token, right_token))
        best = np.argpartition(-scores, k)[:k]
        top.append([model.candidates[i] for i in best[np.argsort(-scores[best], kind="stable")]])
        truth.append(line[unit.position])
    return Guesses(truth, top)


# ---- 5. the character BERT on the same positions --------------------------------------------------------------------


def one_masked_per_row(tokenizer: PreTrainedTokenizerBase, lines: Sequence[str], units: Sequence[MaskedChar], *,
                       batch_size: int = 256) -> list[dict[str, torch.Tensor]]:
    """Batches with one prediction per row: the unit's line with its ``hidden`` characters as [MASK] and a label
    (the true id) at ``position`` only, for :func:`mlm_course.pretraining.masked_predictions`."""
    batches = []
    for begin in range(0, len(units), batch_size):
        chunk = units[begin : begin + batch_size]
        encoded = tokenizer([lines[u.line] for u in chunk], padding=True, return_tensors="pt")
        ids, labels = encoded["input_ids"].clone(), torch.full_like(encoded["input_ids"], IGNORE_INDEX)
        for row, unit in enumerate(chunk):  # a character tokenizer: character i is token i + 1, after [CLS]
            labels[row, unit.position + 1] = ids[row, unit.position + 1]
            ids[row, [i + 1 for i in unit.hidden]] = tokenizer.mask_token_id
        batches.append({"input_ids": ids, "attention_mask": encoded["attention_mask"], "labels": labels})
    return batches


def bert_guesses(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, lines: Sequence[str],
                 units: Sequence[MaskedChar]) -> Guesses:
    """The model's five best characters at each unit (hidden as :func:`one_masked_per_row` hides them)."""
    from mlm_course.pretraining import masked_predictions

    predictions = masked_predictions(model, one_masked_per_row(tokenizer, lines, units))
    top = [tokenizer.convert_ids_to_tokens(row) for row in predictions.top5.tolist()]
    return Guesses([lines[u.line][u.position] for u in units], top)


def known_units(tokenizer: PreTrainedTokenizerBase, lines: Sequence[str], units: Sequence[MaskedChar]) -> list[MaskedChar]:
    """The units whose character is in the tokenizer's vocabulary (an [UNK] label is no fair test of either model)."""
    vocab = tokenizer.get_vocab()
    return [unit for unit in units if lines[unit.line][unit.position] in vocab]


def paired_scores(scored: dict[str, Guesses]) -> dict:
    """Two predictors' guesses at the same positions (``{name: Guesses}``, the first is McNemar's a): per name the
    top-1 / top-5 hits and shares, the number of ``positions``, and the exact McNemar test of the top-1 answers."""
    from mlm_course.statistics import exact_mcnemar

    if len(scored) != 2 or len({tuple(guesses.truth) for guesses in scored.values()}) != 1:
        raise ValueError("pass two predictors' guesses at the same positions (the same truths, in the same order).")
    first, second = scored.values()
    n = len(first.truth)
    out: dict = {"positions": n}
    for name, guesses in scored.items():
        top1, top5 = sum(guesses.hits(1)), sum(guesses.hits(5))
        out[name] = {"top1_hits": top1, "top5_hits": top5, "top1": top1 / n, "top5": top5 / n}
    out["mcnemar"] = exact_mcnemar(first.hits(1), second.hits(1))
    return out


def compare_with_bigram(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, lines: Sequence[str],
                        bigram: NgramModel) -> dict:
    """Every known character of ``lines`` masked alone: top-1 / top-5 hits of ``model`` and of ``bigram`` on the
    same positions, and the exact McNemar test of their top-1 answers (paired by position)."""
    units = known_units(tokenizer, lines, mask_units(lines, "character"))
    return paired_scores({"bert": bert_guesses(model, tokenizer, lines, units),
                          "bigram": neighbour_guesses(bigram, lines, units)})


def word_units(lines: Sequence[str]) -> list[MaskedChar]:
    """Every character of every multi-character jieba word of ``lines``, with its whole word hidden."""
    return [unit for unit in mask_units(lines, "word") if unit.word_length > 1]


def compare_models(first: torch.nn.Module, second: torch.nn.Module, tokenizer: PreTrainedTokenizerBase,
                   lines: Sequence[str], units: Sequence[MaskedChar], names: tuple[str, str] = ("first", "second")
                   ) -> dict:
    """Two BERTs on the same ``units`` of ``lines`` (those whose character the tokenizer knows): :func:`paired_scores`
    of their guesses under ``names`` (McNemar's a is ``first``)."""
    if len(set(names)) != 2:
        raise ValueError(f"names={names!r}: give the two models two different names.")
    units = known_units(tokenizer, lines, units)
    return paired_scores({name: bert_guesses(model, tokenizer, lines, units)
                          for name, model in zip(names, (first, second), strict=True)})
