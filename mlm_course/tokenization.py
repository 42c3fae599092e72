"""WordPiece tokenisation: the real bert-base-uncased tokenizer (shipped vocab), training our own, comparing them.

* :func:`bert_tokenizer` — bert-base-uncased's tokenizer built offline from the shipped ``vocab.txt``; behaves like the
  hub's (lower-casing, accent stripping, punctuation / Chinese-character splitting, ``##`` continuation pieces,
  [CLS]/[SEP]/[PAD]/[MASK]/[UNK] = 101/102/0/103/100, ``model_max_length`` 512).
* :func:`train_wordpiece` — a WordPiece vocabulary trained on any texts, wrapped with BERT's normaliser,
  pre-tokeniser and post-processor; ``save_pretrained`` / ``AutoTokenizer.from_pretrained`` round-trip.
* :func:`course_tokenizer` — the course's own 8,192-entry WordPiece vocab (``scripts/train_course_tokenizer.py``).
* :func:`wordpiece_word` / :func:`wordpiece_steps` — greedy longest-match-first in plain Python, for teaching.
* :func:`token_stats`, :func:`vocab_overlap`, :func:`word_ids`, :func:`word_ids_from_pieces`,
  :func:`whole_word_groups`, :func:`masked_piece_leak` — what the notebook measures.

WordPiece *training* in ``tokenizers`` is not deterministic (about half the ids differ between two runs on the same
text): the course ships the trained tokenizer and never prints ids of a freshly trained one.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, BertTokenizer, PreTrainedTokenizerFast

from mlm_course import corpus

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""BERT's five special tokens. A vocabulary trained by :func:`train_wordpiece` gives them ids 0…4 in this order."""
CONTINUATION_PREFIX = "##"
MAX_INPUT_CHARS_PER_WORD = 100
"""A word longer than this becomes a single [UNK] (as in BERT)."""
MODEL_MAX_LENGTH = 512


# ---- loading ---------------------------------------------------------------------------------------------------


def read_vocab(path: str | Path) -> dict[str, int]:
    """A ``vocab.txt`` file as ``{token: id}``: the id of a token is its line number, counting from 0."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no vocabulary file at {path}: pass the path of a vocab.txt (one token per line).")
    tokens = path.read_text(encoding="utf-8").split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    vocab = {token: i for i, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError(f"{path} lists some token twice: each line of a vocab.txt must be a distinct token.")
    return vocab


def _bert_from_vocab(vocab: dict[str, int]) -> BertTokenizer:
    # transformers 5: BertTokenizer(vocab_file=...) silently ignores the file; vocab= is the working argument.
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise ValueError(f"the vocabulary lacks the special tokens {missing}; a BERT vocabulary needs all of "
                         f"{list(SPECIAL_TOKENS)}.")
    return BertTokenizer(vocab=dict(vocab), do_lower_case=True, model_max_length=MODEL_MAX_LENGTH)


@lru_cache(maxsize=1)
def bert_tokenizer() -> BertTokenizer:
    """bert-base-uncased's tokenizer (a transformers fast tokenizer) from the shipped vocab, offline.

    Cached: every call returns the same object, so do not change its settings in place.
    """
    return _bert_from_vocab(read_vocab(corpus.bert_vocab_file()))


def load_tokenizer(folder: str | Path) -> PreTrainedTokenizerFast:
    """A tokenizer folder written by ``save_pretrained`` (tokenizer.json + tokenizer_config.json), offline."""
    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"{folder} holds no tokenizer.json: pass a folder written by tokenizer.save_pretrained(...)"
            " (for the course vocab run scripts/train_course_tokenizer.py)."
        )
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


@lru_cache(maxsize=1)
def course_tokenizer() -> PreTrainedTokenizerFast:
    """The course's own WordPiece tokenizer (8,192 entries, trained on the corpus' train split), offline. Cached."""
    return load_tokenizer(corpus.course_tokenizer_dir())


# ---- training --------------------------------------------------------------------------------------------------


def _check_texts(texts: Iterable[str], what: str = "texts") -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{what} must be a list of strings, not one string: wrap it as [text].")
    texts = list(texts)
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{what} must hold strings only; found {bad[0]}: convert each item with str() first.")
    if not any(t.strip() for t in texts):
        raise ValueError(f"{what} is empty (or only whitespace): pass at least one non-empty string.")
    return texts


def train_wordpiece(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    limit_alphabet: int | None = 1000,
    show_progress: bool = False,
) -> BertTokenizer:
    """Train a WordPiece vocabulary of at most ``vocab_size`` entries on ``texts``; BERT's pipeline around it.

    Normaliser (lower-case, strip accents), pre-tokeniser (whitespace + punctuation), ``##`` continuation pieces,
    [CLS] x [SEP] / [CLS] a [SEP] b [SEP] post-processing and ``model_max_length`` are those of bert-base-uncased;
    the specials get ids [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4. Not deterministic (a ``tokenizers``
    property): two runs on the same text give the same kind of vocabulary with different ids.
    """
    texts = _check_texts(texts)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}.")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size={vocab_size} leaves no room beyond the {len(SPECIAL_TOKENS)} special tokens; "
                         "ask for a few hundred at least.")
    if min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency}: use 1 or more (a pair seen fewer times is never merged).")
    raw = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    raw.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=True)
    raw.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        limit_alphabet=limit_alphabet,
        continuing_subword_prefix=CONTINUATION_PREFIX,
        show_progress=show_progress,
    )
    raw.train_from_iterator(texts, trainer=trainer)
    vocab = raw.get_vocab()
    if len(vocab) > vocab_size:
        # The trainer never drops the alphabet: it silently returns more entries than asked for.
        raise ValueError(
            f"vocab_size={vocab_size} is smaller than the {len(vocab)} entries this text needs at minimum "
            f"({len(SPECIAL_TOKENS)} special tokens + every character, alone and as a ##piece): ask for more, "
            "or lower limit_alphabet."
        )
    return _bert_from_vocab(vocab)


def save_vocab_txt(tokenizer: PreTrainedTokenizerFast, path: str | Path) -> Path:
    """Write ``vocab.txt`` (one token per line, line number = id), the format bert-base-uncased ships."""
    vocab = tokenizer.get_vocab()
    ordered = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in ordered] != list(range(len(ordered))):
        raise ValueError("the tokenizer's ids are not 0…n-1 without gaps, so they cannot be written as line numbers.")
    path = Path(path)
    path.write_text("".join(t + "\n" for t in ordered), encoding="utf-8")
    return path


# ---- the algorithm, in plain Python ----------------------------------------------------------------------------


@dataclass(frozen=True)
class WordPieceStep:
    """One try of greedy longest-match-first: ``candidate`` (with ``##`` after the first piece) at ``start``."""

    start: int
    end: int
    candidate: str
    found: bool


def wordpiece_steps(word: str, vocab: Iterable[str] | dict[str, int], *, unk_token: str = "[UNK]",
                    max_chars: int = MAX_INPUT_CHARS_PER_WORD) -> tuple[list[str], list[WordPieceStep]]:
    """Greedy longest-match-first on one (normalised, pre-tokenised) word: ``(pieces, every candidate tried)``.

    From the current start, try the longest remaining substring, then shorter ones, until one is in the vocab
    (with ``##`` unless it starts the word); take it and continue after it. If nothing matches, or the word is longer
    than ``max_chars``, the *whole word* is ``[unk_token]``.
    """
    if not isinstance(word, str):
        raise TypeError(f"word must be a string, got {type(word).__name__}.")
    vocab = vocab if isinstance(vocab, (dict, set, frozenset)) else set(vocab)
    steps: list[WordPieceStep] = []
    if len(word) > max_chars:
        return [unk_token], steps
    pieces: list[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            candidate = word[start:end] if start == 0 else CONTINUATION_PREFIX + word[start:end]
            found = candidate in vocab
            steps.append(WordPieceStep(start, end, candidate, found))
            if found:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk_token], steps
        pieces.append(piece)
        start = end
    return pieces, steps


def wordpiece_word(word: str, vocab: Iterable[str] | dict[str, int], *, unk_token: str = "[UNK]",
                   max_chars: int = MAX_INPUT_CHARS_PER_WORD) -> list[str]:
    """The WordPiece pieces of one word (see :func:`wordpiece_steps`)."""
    return wordpiece_steps(word, vocab, unk_token=unk_token, max_chars=max_chars)[0]


def pre_tokenize(tokenizer: PreTrainedTokenizerFast, text: str) -> list[str]:
    """The words WordPiece sees: ``text`` normalised and split by the tokenizer's own normaliser / pre-tokeniser."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}.")
    backend = tokenizer.backend_tokenizer
    normalised = backend.normalizer.normalize_str(text) if backend.normalizer is not None else text
    return [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(normalised)]


# ---- words and pieces ------------------------------------------------------------------------------------------


def word_ids(tokenizer: PreTrainedTokenizerFast, text: str, *, add_special_tokens: bool = True) -> list[int | None]:
    """For each token of ``text``, the index of the word it came from (None for [CLS]/[SEP]): ``word_ids()``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}.")
    return tokenizer(text, add_special_tokens=add_special_tokens).word_ids()


def word_ids_from_pieces(tokens: Sequence[str], *, special_tokens: Iterable[str] = SPECIAL_TOKENS,
                         prefix: str = CONTINUATION_PREFIX) -> list[int | None]:
    """Word index per token recovered from the strings alone: a ``##`` piece continues the previous word.

    The fallback when only tokens are at hand (a slow tokenizer, a saved list). Special tokens get None, except
    [MASK] and [UNK], which stand for (part of) a word. Unlike ``word_ids()`` it cannot tell that two pieces without
    ``##`` (e.g. an [UNK] next to a word) were one word in the text.
    """
    if isinstance(tokens, str):
        raise TypeError("tokens must be a list of token strings, not one string: use tokenizer.tokenize(text).")
    no_word = set(special_tokens) - {"[MASK]", "[UNK]"}
    ids: list[int | None] = []
    current = -1
    for token in tokens:
        if token in no_word:
            ids.append(None)
        elif token.startswith(prefix) and current >= 0:
            ids.append(current)
        else:
            current += 1
            ids.append(current)
    return ids


def whole_word_groups(ids: Sequence[int | None]) -> list[list[int]]:
    """Token positions grouped by word (from :func:`word_ids`): the units whole-word masking masks together."""
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(ids):
        if word is not None:
            groups.setdefault(word, []).append(position)
    return list(groups.values())


def words_as_pieces(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str], *,
                     batch_size: int = 1000) -> Iterator[tuple[str, ...]]:
    """Each running word of ``texts`` (as the pre-tokeniser splits them) as its tuple of WordPiece tokens."""
    texts = [t for t in _check_texts(texts) if t.strip()]
    backend = tokenizer.backend_tokenizer  # no max-length warnings, no tensors: just tokens and word ids
    for i in range(0, len(texts), batch_size):
        for encoding in backend.encode_batch(texts[i : i + batch_size], add_special_tokens=False):
            word: list[str] = []
            previous = None
            for token, w in zip(encoding.tokens, encoding.word_ids, strict=True):
                if w != previous and word:
                    yield tuple(word)
                    word = []
                word.append(token)
                previous = w
            if word:
                yield tuple(word)


@dataclass(frozen=True)
class TokenStats:
    """How a tokenizer cuts a text into words and pieces (a word that WordPiece cannot spell is one [UNK])."""

    words: int  # running words as the pre-tokeniser splits them (each punctuation mark is a word)
    tokens: int  # WordPiece tokens, no [CLS]/[SEP]
    unk_tokens: int
    pieces_per_word: dict[int, int]  # {number of pieces: number of words}

    @property
    def mean_pieces_per_word(self) -> float:
        return self.tokens / self.words

    @property
    def whole_word_fraction(self) -> float:
        """Coverage: the fraction of running words that are one vocab entry (not split, not [UNK])."""
        return (self.pieces_per_word.get(1, 0) - self.unk_tokens) / self.words

    @property
    def split_fraction(self) -> float:
        """The fraction of running words cut into two or more pieces."""
        return 1 - self.pieces_per_word.get(1, 0) / self.words

    @property
    def unk_rate(self) -> float:
        """The fraction of tokens that are [UNK] (= of words, up to the ratio tokens / words)."""
        return self.unk_tokens / self.tokens


def token_stats(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str]) -> TokenStats:
    """Pieces per word, coverage and [UNK] rate of ``tokenizer`` on ``texts``."""
    unk = tokenizer.unk_token
    per_word: Counter[int] = Counter()
    unk_tokens = 0
    for pieces in words_as_pieces(tokenizer, texts):
        per_word[len(pieces)] += 1
        unk_tokens += pieces.count(unk)
    words = sum(per_word.values())
    if words == 0:
        raise ValueError("the texts contain no words once normalised: pass real text.")
    tokens = sum(n * c for n, c in per_word.items())
    return TokenStats(words, tokens, unk_tokens, dict(sorted(per_word.items())))


@dataclass(frozen=True)
class VocabOverlap:
    """Two vocabularies side by side (special tokens excluded)."""

    size_a: int
    size_b: int
    shared: int
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]

    @property
    def fraction_of_a_in_b(self) -> float:
        return self.shared / self.size_a

    @property
    def fraction_of_b_in_a(self) -> float:
        return self.shared / self.size_b

    @property
    def jaccard(self) -> float:
        return self.shared / (self.size_a + self.size_b - self.shared)


def vocab_overlap(a: PreTrainedTokenizerFast | Iterable[str], b: PreTrainedTokenizerFast | Iterable[str]) -> VocabOverlap:
    """Shared and exclusive entries of two vocabularies (tokenizers or token lists), specials left out.

    ``only_a`` / ``only_b`` are sorted by id in their own vocabulary when a tokenizer is given.
    """
    def entries(x) -> list[str]:
        if isinstance(x, str):
            raise TypeError("pass a tokenizer or a list of tokens, not one string.")
        if hasattr(x, "get_vocab"):
            vocab = x.get_vocab()
            x = sorted(vocab, key=vocab.__getitem__)
        specials = set(SPECIAL_TOKENS)
        return [t for t in x if t not in specials]

    ea, eb = entries(a), entries(b)
    sa, sb = set(ea), set(eb)
    return VocabOverlap(len(sa), len(sb), len(sa & sb), tuple(t for t in ea if t not in sb),
                        tuple(t for t in eb if t not in sa))


# ---- why whole-word masking ------------------------------------------------------------------------------------


def piece_lexicon(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str]) -> Counter[tuple[str, ...]]:
    """How often each multi-piece word occurs in ``texts``, keyed by its pieces (e.g. ('una', '##ffa', '##ble'))."""
    return Counter(p for p in words_as_pieces(tokenizer, texts) if len(p) > 1)


def guess_masked_piece(visible: Sequence[str], masked_at: int, lexicon: Counter[tuple[str, ...]]) -> str | None:
    """The most frequent lexicon word matching every visible piece: its piece at ``masked_at`` (None if no match).

    ``visible`` is the word's pieces; the one at ``masked_at`` is ignored (write "[MASK]"). No model: a lookup.
    """
    if not 0 <= masked_at < len(visible):
        raise ValueError(f"masked_at={masked_at} is not a position of the {len(visible)} pieces.")
    key = _without(visible, masked_at)
    matches = Counter({p[masked_at]: c for p, c in lexicon.items()
                       if len(p) == len(visible) and _without(p, masked_at) == key})
    return matches.most_common(1)[0][0] if matches else None


def _without(pieces: Sequence[str], k: int) -> tuple[str, ...]:
    return (*pieces[:k], "[MASK]", *pieces[k + 1 :])


def masked_piece_leak(tokenizer: PreTrainedTokenizerFast, train_texts: Iterable[str], test_texts: Iterable[str],
                      *, seed: int = 0) -> tuple[int, int]:
    """Mask one random piece of each multi-piece word of ``test_texts``; count how often a lookup recovers it.

    Returns ``(recovered, masked)``. The lookup (as :func:`guess_masked_piece`) knows only which multi-piece words
    occur in ``train_texts`` and how often: when it recovers most pieces, predicting a piece whose word-mates are
    visible is too easy a task — the reason for whole-word masking.
    """
    options: dict[tuple[str, ...], Counter[str]] = {}
    for pieces, count in piece_lexicon(tokenizer, train_texts).items():
        for k in range(len(pieces)):
            options.setdefault(_without(pieces, k), Counter())[pieces[k]] += count
    best = {key: counter.most_common(1)[0][0] for key, counter in options.items()}
    rng = random.Random(seed)
    recovered = masked = 0
    for pieces in words_as_pieces(tokenizer, test_texts):
        if len(pieces) > 1:
            k = rng.randrange(len(pieces))
            recovered += best.get(_without(pieces, k)) == pieces[k]
            masked += 1
    return recovered, masked


__all__ = [
    "SPECIAL_TOKENS", "CONTINUATION_PREFIX", "MAX_INPUT_CHARS_PER_WORD", "MODEL_MAX_LENGTH",
    "read_vocab", "bert_tokenizer", "load_tokenizer", "course_tokenizer", "train_wordpiece", "save_vocab_txt",
    "WordPieceStep", "wordpiece_steps", "wordpiece_word", "pre_tokenize", "words_as_pieces",
    "word_ids", "word_ids_from_pieces", "whole_word_groups", "TokenStats", "token_stats",
    "VocabOverlap", "vocab_overlap", "piece_lexicon", "guess_masked_piece", "masked_piece_leak",
]
