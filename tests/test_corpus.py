"""Tests for mlm_course.corpus: shipped assets, splits without leakage, offline loading, errors."""

from __future__ import annotations

import gzip
import json
import socket

import pytest

from mlm_course import corpus
from mlm_course.settings import SETTINGS

N_SENTENCES = 10_568  # 10,605 rated sentences (Hutto & Gilbert 2014) minus 37 with mean rating 0
N_POSITIVE = 5_242
N_NEGATIVE = 5_326


# --------------------------------------------------------------------------- offline
def test_everything_loads_offline(monkeypatch):
    """No network: HF_HUB_OFFLINE set and any socket creation fails; every asset still loads."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*args, **kwargs):
        raise OSError("network access attempted")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    corpus._pretraining_records.cache_clear()
    corpus._sentiment_rows.cache_clear()
    for split in corpus.PRETRAINING_SPLITS:
        assert corpus.pretraining_paragraphs(split)
    for split in corpus.SENTIMENT_SPLITS:
        assert len(corpus.sentiment(split)) > 0
    assert corpus.bert_vocab_file().is_file()
    assert corpus.corpus_summary()["vocab_size"] == 30522


# --------------------------------------------------------------------------- vocab
def test_vocab_is_bert_base_uncased():
    tokens = corpus.bert_vocab_file().read_text(encoding="utf-8").split("\n")
    assert tokens[-1] == ""  # newline-terminated
    tokens = tokens[:-1]
    assert len(tokens) == 30522 == len(set(tokens))
    ids = {t: i for i, t in enumerate(tokens)}
    assert (ids["[PAD]"], ids["[UNK]"], ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]) == (0, 100, 101, 102, 103)
    assert ids["the"] == 1996 and ids["##ing"] == 2075  # well-known bert-base-uncased ids
    assert all(t == t.lower() for t in tokens if not t.startswith("["))  # uncased


def test_vocab_drives_a_wordpiece_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.BertWordPieceTokenizer(str(corpus.bert_vocab_file()), lowercase=True)
    enc = tok.encode("Hello world, tokenizing!")
    assert enc.ids[:3] == [101, 7592, 2088] and enc.ids[-1] == 102  # bert-base-uncased ids
    assert enc.tokens[4:6] == ["token", "##izing"]  # a subword split


# --------------------------------------------------------------------------- pretraining corpus
def test_pretraining_sources_and_splits_are_nonempty_and_english():
    summary = corpus.corpus_summary()["pretraining"]
    for split in corpus.PRETRAINING_SPLITS:
        for source in corpus.PRETRAINING_SOURCES:
            assert summary[split][source]["paragraphs"] > 100, (split, source)
    assert summary["train"]["austen"]["documents"] == summary["heldout"]["austen"]["documents"] == 6
    # DATA_SOURCES.md measured ~717 k words for the six novels; headings and front matter are dropped
    austen_words = summary["train"]["austen"]["words"] + summary["heldout"]["austen"]["words"]
    assert 700_000 < austen_words < 720_000
    text = corpus.pretraining_text("train", sources=("austen",))
    assert "It is a truth universally acknowledged" in text
    for token in (" the ", " and ", " of "):
        assert text.count(token) > 10_000


def test_heldout_is_about_five_percent_of_whole_documents():
    summary = corpus.corpus_summary()["pretraining"]
    for source in corpus.PRETRAINING_SOURCES:
        held, train = summary["heldout"][source]["words"], summary["train"][source]["words"]
        assert 0.02 < held / (held + train) < 0.10, source
    records = {s: corpus._pretraining_records(s) for s in corpus.PRETRAINING_SPLITS}
    # whole units: no (novel, chapter) and no Wikipedia article appears in both splits
    units = {s: {(r[0], r[1], r[2] if r[0] == "austen" else "") for r in rows} for s, rows in records.items()}
    assert not units["train"] & units["heldout"]
    # held-out chapters are each novel's last ones
    for doc in {r[1] for r in records["heldout"] if r[0] == "austen"}:
        chapter = lambda r: int(r[2].split()[-1])  # noqa: E731
        held = [chapter(r) for r in records["heldout"] if r[1] == doc]
        train = [chapter(r) for r in records["train"] if r[1] == doc]
        assert min(held) == max(train) + 1, doc


def test_heldout_paragraphs_never_appear_in_train():
    train = set(corpus.pretraining_paragraphs("train"))
    heldout = corpus.pretraining_paragraphs("heldout")
    assert heldout and not train.intersection(heldout)


def test_paragraphs_are_clean():
    for split in corpus.PRETRAINING_SPLITS:
        for p in corpus.pretraining_paragraphs(split):
            assert p and p == p.strip() and "\n" not in p and "  " not in p
            assert not p.upper().startswith("CHAPTER ")
        for p in corpus.pretraining_paragraphs(split, sources=("wikipedia",)):
            assert "[[" not in p and "{{" not in p and "''" not in p and len(p.split()) >= 12


def test_sources_select_and_order():
    austen = corpus.pretraining_paragraphs("train", sources=("austen",))
    wiki = corpus.pretraining_paragraphs("train", sources="wikipedia")
    assert corpus.pretraining_paragraphs("train") == austen + wiki
    assert corpus.pretraining_paragraphs("train", sources=("wikipedia", "austen")) == wiki + austen


def test_results_are_copies_not_the_cache():
    first = corpus.pretraining_paragraphs("heldout")
    first.clear()
    assert corpus.pretraining_paragraphs("heldout")
    s = corpus.sentiment("dev")
    s.texts.clear()
    assert len(corpus.sentiment("dev")) > 0


def test_pretraining_text_max_chars_cuts_at_paragraph_boundary():
    paragraphs = corpus.pretraining_paragraphs("train")
    full = corpus.pretraining_text("train")
    assert full == "\n\n".join(paragraphs)
    limit = 10_000
    cut = corpus.pretraining_text("train", max_chars=limit)
    assert len(cut) <= limit and full.startswith(cut)
    kept = cut.split("\n\n")
    assert kept == paragraphs[: len(kept)]  # whole paragraphs only
    assert len(cut) + 2 + len(paragraphs[len(kept)]) > limit  # the next paragraph would not have fitted
    # tiny limits still return the first paragraph whole
    assert corpus.pretraining_text("train", max_chars=1) == paragraphs[0]
    quick = corpus.pretraining_text("train", max_chars=SETTINGS.max_chars)
    if SETTINGS.max_chars is None:
        assert quick == full
    else:
        assert SETTINGS.max_chars - 5_000 < len(quick) <= SETTINGS.max_chars


@pytest.mark.parametrize("bad", [0, -5])
def test_pretraining_text_rejects_bad_max_chars(bad):
    with pytest.raises(ValueError, match="max_chars must be positive"):
        corpus.pretraining_text(max_chars=bad)
    with pytest.raises(TypeError, match="max_chars must be an int"):
        corpus.pretraining_text(max_chars=1.5)


# --------------------------------------------------------------------------- sentiment
def test_sentiment_counts_and_labels():
    splits = {s: corpus.sentiment(s) for s in corpus.SENTIMENT_SPLITS}
    assert sum(len(s) for s in splits.values()) == N_SENTENCES
    assert sum(sum(s.labels) for s in splits.values()) == N_POSITIVE
    assert N_SENTENCES - N_POSITIVE == N_NEGATIVE
    for s in splits.values():
        assert len(s.texts) == len(s.labels) == len(s.ratings) == len(s.ids) == len(s)
        for label, rating in zip(s.labels, s.ratings, strict=True):
            assert rating != 0 and -4 <= rating <= 4
            assert label == int(rating > 0)
    ids = [i for s in splits.values() for i in s.ids]
    assert len(set(ids)) == N_SENTENCES


def test_sentiment_split_sizes_and_stratification():
    overall = N_POSITIVE / N_SENTENCES
    for name, fraction in zip(corpus.SENTIMENT_SPLITS, (0.8, 0.1, 0.1), strict=True):
        s = corpus.sentiment(name)
        assert abs(len(s) / N_SENTENCES - fraction) < 0.005, name
        assert abs(sum(s.labels) / len(s) - overall) < 0.01, name


def test_sentiment_splits_are_disjoint_by_text():
    texts = {s: set(corpus.sentiment(s).texts) for s in corpus.SENTIMENT_SPLITS}
    assert not texts["train"] & texts["dev"]
    assert not texts["train"] & texts["test"]
    assert not texts["dev"] & texts["test"]


def test_sentiment_text_is_decoded_utf8():
    texts = [t for s in corpus.SENTIMENT_SPLITS for t in corpus.sentiment(s).texts]
    joined = "\n".join(texts)
    assert "clichés" in joined  # UTF-8 in the source, not mojibake
    assert "Ã" not in joined and "\r" not in joined
    first = corpus.sentiment("train" if 1 in corpus.sentiment("train").ids else "dev")
    assert isinstance(first.texts[0], str) and isinstance(first.ratings[0], float)


def test_sentiment_split_is_frozen():
    s = corpus.sentiment("test")
    with pytest.raises(AttributeError):
        s.texts = []  # type: ignore[misc]


# --------------------------------------------------------------------------- files and errors
def test_asset_dir_and_manifest():
    data = corpus.asset_dir()
    assert data.name == "data" and data.parent.name == "mlm_course"
    manifest = json.loads((data / "sources.json").read_text(encoding="utf-8"))
    import hashlib

    for name, digest in manifest["outputs_sha256"].items():
        assert hashlib.sha256((data / name).read_bytes()).hexdigest() == digest, name


def test_gzip_assets_are_deterministic():
    """gzip headers carry no timestamp or file name, so a rebuild can be byte-identical."""
    for path in corpus.asset_dir().rglob("*.gz"):
        header = path.read_bytes()[:10]
        assert header[:2] == b"\x1f\x8b" and header[4:8] == b"\0\0\0\0", path  # mtime == 0
        assert not header[3] & 0x08, path  # FNAME flag unset
        with gzip.open(path) as f:
            f.read(1)


@pytest.mark.parametrize("split", ["test", "dev", "valid", "", None])
def test_bad_pretraining_split(split):
    with pytest.raises(ValueError, match="use one of 'train', 'heldout'"):
        corpus.pretraining_paragraphs(split)


@pytest.mark.parametrize("sources", [("shakespeare",), ("austen", "bible"), ()])
def test_bad_pretraining_source(sources):
    with pytest.raises(ValueError, match="'austen', 'wikipedia'"):
        corpus.pretraining_text("train", sources=sources)


@pytest.mark.parametrize("split", ["validation", "heldout", "TRAIN"])
def test_bad_sentiment_split(split):
    with pytest.raises(ValueError, match="use one of 'train', 'dev', 'test'"):
        corpus.sentiment(split)


def test_missing_asset_says_how_to_rebuild(monkeypatch, tmp_path):
    monkeypatch.setattr(corpus, "asset_dir", lambda: tmp_path)
    corpus._pretraining_records.cache_clear()
    corpus._sentiment_rows.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="run scripts/build_assets.py"):
            corpus.pretraining_paragraphs("train")
        with pytest.raises(FileNotFoundError, match="run scripts/build_assets.py"):
            corpus.sentiment("train")
        with pytest.raises(FileNotFoundError, match="run scripts/build_assets.py"):
            corpus.bert_vocab_file()
    finally:
        corpus._pretraining_records.cache_clear()
        corpus._sentiment_rows.cache_clear()


def test_review_training_text_is_the_train_sentences_only():
    text = corpus.review_training_text()
    sentences = text.split("\n\n")
    assert sentences == corpus.sentiment("train").texts
    held_back = set(corpus.sentiment("dev").texts) | set(corpus.sentiment("test").texts)
    assert not held_back & set(sentences) - set(corpus.sentiment("train").texts)
    short = corpus.review_training_text(max_chars=500)
    assert len(short) <= 500 and text.startswith(short)
