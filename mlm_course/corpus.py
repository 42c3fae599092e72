"""The shipped texts and labelled sets: load, split, count. The only module that knows where assets live.

Assets (built by ``scripts/build_assets.py``; provenance and licences in ``DATA.md``):

* ``data/corpus/{train,heldout}.jsonl.gz`` -- English paragraphs for MLM pretraining: Jane Austen's six
  novels and a Wikipedia sample. The held-out split is whole chapters / whole articles, never single sentences.
* ``data/sentiment/movie_review_sentences.tsv.gz`` -- 10,568 movie-review sentences (Hutto & Gilbert 2014)
  with a binary label (rating > 0), split 80/10/10 stratified by label.
* ``data/bert-base-uncased/vocab.txt`` -- bert-base-uncased's WordPiece vocabulary (30,522 tokens).
* ``data/chinese/*.jsonl.gz`` -- classical Chinese poems (``scripts/build_chinese_assets.py``): the Tang and Song
  poems of Debian's fortunes-zh, split into train and held-out by poem, and Tang poems from the chinese-poetry
  collection (train only); ``data/chinese-char-bert/`` -- the character BERT trained on them.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PRETRAINING_SPLITS = ("train", "heldout")
PRETRAINING_SOURCES = ("austen", "wikipedia")
SENTIMENT_SPLITS = ("train", "dev", "test")

_CORPUS_FILE = "corpus/{split}.jsonl.gz"
_SENTIMENT_FILE = "sentiment/movie_review_sentences.tsv.gz"
_VOCAB_FILE = "bert-base-uncased/vocab.txt"
_CHINESE_FILES = {"tang300": "chinese/poems.jsonl.gz", "song100": "chinese/poems.jsonl.gz",
                  "quantangshi": "chinese/quantangshi.jsonl.gz"}
CHINESE_SOURCES = tuple(_CHINESE_FILES)


def asset_dir() -> Path:
    """The folder holding every shipped asset (``mlm_course/data``)."""
    return Path(__file__).resolve().parent / "data"


def _asset(relative: str) -> Path:
    path = asset_dir() / relative
    if not path.is_file():
        raise FileNotFoundError(
            f"Missing course asset {path}. Reinstall the package or run scripts/build_assets.py to rebuild it."
        )
    return path


def _check_choice(kind: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"Unknown {kind} {value!r}; use one of {', '.join(map(repr, allowed))}.")
    return value


def _check_sources(sources: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(sources, str):
        sources = (sources,)
    sources = tuple(sources)
    if not sources:
        raise ValueError(f"sources is empty; pass one or more of {PRETRAINING_SOURCES}.")
    for source in sources:
        _check_choice("source", source, PRETRAINING_SOURCES)
    return sources


@lru_cache(maxsize=4)
def _pretraining_records(split: str) -> tuple[tuple[str, str, str, str], ...]:
    """(source, doc, part, text) for every paragraph of one split, in file order."""
    with gzip.open(_asset(_CORPUS_FILE.format(split=split)), "rt", encoding="utf-8") as f:
        rows = (json.loads(line) for line in f)
        return tuple((r["source"], r["doc"], r["part"], r["text"]) for r in rows)


def pretraining_paragraphs(split: str = "train", sources: Iterable[str] = PRETRAINING_SOURCES) -> list[str]:
    """Paragraphs of the pretraining corpus for ``split`` ("train" or "heldout"), in the order of ``sources``.

    Within a source the order is the book / article order (Austen's novels in publication order).
    Returns a new list each call.
    """
    split = _check_choice("split", split, PRETRAINING_SPLITS)
    sources = _check_sources(sources)
    records = _pretraining_records(split)
    return [text for source in sources for (s, _doc, _part, text) in records if s == source]


def pretraining_text(
    split: str = "train", sources: Iterable[str] = PRETRAINING_SOURCES, max_chars: int | None = None
) -> str:
    """The paragraphs joined by a blank line ("\\n\\n").

    ``max_chars`` (e.g. ``SETTINGS.max_chars``) keeps whole paragraphs while the text stays within
    ``max_chars`` characters (at least the first paragraph is always kept); ``None`` keeps everything.
    """
    return _join_within(pretraining_paragraphs(split, sources), max_chars)


def review_training_text(max_chars: int | None = None) -> str:
    """The sentences of the sentiment **train** split (no labels), one paragraph each, for task-adaptive
    continued pretraining (Gururangan et al., 2020); never the dev or test sentences. ``max_chars`` as above."""
    return _join_within(sentiment("train").texts, max_chars)


def _join_within(paragraphs: list[str], max_chars: int | None) -> str:
    if max_chars is None:
        return "\n\n".join(paragraphs)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int):
        raise TypeError(f"max_chars must be an int or None, not {type(max_chars).__name__}.")
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive (or None for the whole text), got {max_chars}.")
    kept, length = [], -2
    for paragraph in paragraphs:
        length += len(paragraph) + 2
        if kept and length > max_chars:
            break
        kept.append(paragraph)
    return "\n\n".join(kept)


@dataclass(frozen=True)
class SentimentSplit:
    """One split of the movie-review sentences: parallel lists, label 1 = positive (rating > 0).

    Each :func:`sentiment` call builds fresh lists, so changing them does not affect later calls.
    """

    split: str
    texts: list[str]
    labels: list[int]
    ratings: list[float]
    ids: list[int]

    def __len__(self) -> int:
        return len(self.texts)


@lru_cache(maxsize=4)
def _sentiment_rows() -> tuple[tuple[str, int, float, int, str], ...]:
    with gzip.open(_asset(_SENTIMENT_FILE), "rt", encoding="utf-8", newline="\n") as f:
        header = f.readline().rstrip("\n").split("\t")
        assert header == ["split", "label", "rating", "id", "sentence"], header
        rows = []
        for line in f:
            split, label, rating, sid, sentence = line.rstrip("\n").split("\t")
            rows.append((split, int(label), float(rating), int(sid), sentence))
    return tuple(rows)


def sentiment(split: str) -> SentimentSplit:
    """The movie-review sentences of ``split`` ("train", "dev" or "test"), ordered by original id."""
    split = _check_choice("split", split, SENTIMENT_SPLITS)
    rows = [r for r in _sentiment_rows() if r[0] == split]
    return SentimentSplit(
        split=split,
        texts=[r[4] for r in rows],
        labels=[r[1] for r in rows],
        ratings=[r[2] for r in rows],
        ids=[r[3] for r in rows],
    )


def bert_vocab_file() -> Path:
    """Path of bert-base-uncased's ``vocab.txt`` (one token per line; id = line number - 1)."""
    return _asset(_VOCAB_FILE)


def course_tokenizer_dir() -> Path:
    """Folder of the course's own 8,192-entry WordPiece tokenizer (``scripts/train_course_tokenizer.py``).

    Not checked for existence: the training script writes here; loaders report a missing folder themselves.
    """
    return asset_dir() / "course-wordpiece-8k"


def course_checkpoint_dir() -> Path:
    """Folder of the BERT the course pretrained with ``mlm-course pretrain`` (a ``save_pretrained`` folder)."""
    path = asset_dir() / "course-bert"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"Missing the course checkpoint {path}. Reinstall the package, or train one with "
            "`mlm-course pretrain --out DIR` and load it from DIR."
        )
    return path


@dataclass(frozen=True)
class Poem:
    """One classical Chinese poem: where it is from (``source``), its ``split``, ``title``, ``author`` and ``lines``."""

    source: str
    split: str
    title: str
    author: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        """The lines joined without a break, as the character models read a poem."""
        return "".join(self.lines)


@lru_cache(maxsize=4)
def _poem_records(relative: str) -> tuple[Poem, ...]:
    with gzip.open(_asset(relative), "rt", encoding="utf-8") as f:
        rows = (json.loads(line) for line in f)
        return tuple(Poem(r["source"], r["split"], r["title"], r["author"], tuple(r["lines"])) for r in rows)


def chinese_poems(split: str = "train", sources: Iterable[str] = CHINESE_SOURCES) -> list[Poem]:
    """The shipped Chinese poems of ``split`` ("train" or "heldout") from ``sources``, in file order.

    ``tang300`` (300 Tang poems) and ``song100`` (100 Song poems) are split by poem; ``quantangshi`` (Tang poems of
    the *Complete Tang Poems*, converted to simplified characters) is training text only, and holds no poem that
    shares a line with a held-out one. Provenance and licences: DATA.md.
    """
    split = _check_choice("split", split, PRETRAINING_SPLITS)
    sources = (sources,) if isinstance(sources, str) else tuple(sources)
    if not sources:
        raise ValueError(f"sources is empty; pass one or more of {CHINESE_SOURCES}.")
    for source in sources:
        _check_choice("source", source, CHINESE_SOURCES)
    files = dict.fromkeys(_CHINESE_FILES[source] for source in sources)
    return [poem for relative in files for poem in _poem_records(relative)
            if poem.split == split and poem.source in sources]


def chinese_model_dir() -> Path:
    """Folder of the course's character-level Chinese BERT and its tokenizer (a ``save_pretrained`` folder)."""
    path = asset_dir() / "chinese-char-bert"
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(f"Missing the Chinese character BERT {path}. Reinstall the package, or rebuild it "
                                "with `python scripts/build_chinese_assets.py`.")
    return path


def corpus_summary() -> dict:
    """Counts for notebooks and docs.

    ``{"pretraining": {split: {source: {"paragraphs", "words", "chars", "documents"}}},
    "sentiment": {split: {"sentences", "positive", "negative"}}, "vocab_size": int}``.
    Words are whitespace-separated tokens.
    """
    pretraining: dict = {}
    for split in PRETRAINING_SPLITS:
        pretraining[split] = {}
        records = _pretraining_records(split)
        for source in PRETRAINING_SOURCES:
            texts = [r[3] for r in records if r[0] == source]
            pretraining[split][source] = {
                "paragraphs": len(texts),
                "words": sum(len(t.split()) for t in texts),
                "chars": sum(len(t) for t in texts),
                "documents": len({r[1] for r in records if r[0] == source}),
            }
    sentiment_counts = {}
    for split in SENTIMENT_SPLITS:
        labels = sentiment(split).labels
        sentiment_counts[split] = {"sentences": len(labels), "positive": sum(labels),
                                   "negative": len(labels) - sum(labels)}
    with bert_vocab_file().open(encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    return {"pretraining": pretraining, "sentiment": sentiment_counts, "vocab_size": vocab_size}
