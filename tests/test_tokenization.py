"""tokenization: bert-base-uncased from the shipped vocab against transformers' pure-Python BertTokenizerLegacy and
hand-checked ids; a trained WordPiece round-trips through save_pretrained; the shipped course vocab loads offline."""

import random
from collections import Counter

import pytest
from transformers import AutoTokenizer
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

from mlm_course import corpus, exercises
from mlm_course import tokenization as T

FOX = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def bert():
    return T.bert_tokenizer()


@pytest.fixture(scope="module")
def vocab_lines():
    return corpus.bert_vocab_file().read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def legacy():
    return BertTokenizerLegacy(vocab_file=str(corpus.bert_vocab_file()), do_lower_case=True)


@pytest.fixture(scope="module")
def small_trained():
    texts = corpus.pretraining_text("train", max_chars=200_000).split("\n\n")
    return T.train_wordpiece(texts, 1200)


@pytest.fixture(scope="module")
def heldout_sentences():
    paragraphs = corpus.pretraining_paragraphs("heldout")
    rng = random.Random(2)
    return [p for p in rng.sample(paragraphs, 400)]


# ---- bert-base-uncased -----------------------------------------------------------------------------------------


def test_vocab_file_ids_are_line_numbers(bert, vocab_lines):
    assert len(vocab_lines) == len(bert) == 30522
    assert T.read_vocab(corpus.bert_vocab_file()) == {t: i for i, t in enumerate(vocab_lines)}
    ids = bert(FOX)["input_ids"]
    assert ids == [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]
    words = ["[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ".", "[SEP]"]
    assert [vocab_lines[i] for i in ids] == words


def test_special_tokens_and_max_length(bert):
    assert (bert.pad_token_id, bert.unk_token_id, bert.cls_token_id, bert.sep_token_id, bert.mask_token_id) == (
        0, 100, 101, 102, 103)
    assert bert.model_max_length == 512
    assert bert.tokenize("a [MASK] b") == ["a", "[MASK]", "b"]


def test_bert_tokenizer_is_cached(bert):
    assert T.bert_tokenizer() is bert


def test_known_tokenisations(bert):
    assert bert.tokenize("unaffable") == ["una", "##ffa", "##ble"]
    assert bert.tokenize("Café Résumé naïve") == ["cafe", "resume", "naive"]
    assert bert.tokenize("Hello,world!(yes)") == ["hello", ",", "world", "!", "(", "yes", ")"]
    assert bert.tokenize("don't") == ["don", "'", "t"]
    assert bert.tokenize("☃ snow") == ["[UNK]", "snow"]
    assert bert.tokenize("a" * 101) == ["[UNK]"]
    assert bert.tokenize("a" * 100) != ["[UNK]"]
    assert bert.tokenize("東京") == ["東", "京"]  # Chinese characters are split one by one


def test_pairs_and_padding(bert):
    enc = bert("How old are you?", "I am six.")
    assert enc["token_type_ids"] == exercises.solution("02.2")
    batch = bert(["a b c", "a"], padding=True)
    assert batch["input_ids"][1][-2:] == [0, 0]
    assert batch["attention_mask"] == [[1] * 5, [1, 1, 1, 0, 0]]


def test_matches_the_pure_python_tokenizer(bert, legacy, heldout_sentences):
    assert len(legacy) == len(bert)
    for text in heldout_sentences + ["Café Résumé naïve ☃ 東京 " + "x" * 120]:
        assert bert.tokenize(text) == legacy.tokenize(text), text[:80]
        assert bert(text)["input_ids"] == legacy(text)["input_ids"]


def test_bert_saves_and_reloads(bert, tmp_path):
    bert.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert again(FOX)["input_ids"] == bert(FOX)["input_ids"] and again.model_max_length == 512


def test_read_vocab_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        T.read_vocab(tmp_path / "nope.txt")
    (tmp_path / "v.txt").write_text("a\nb\na\n")
    with pytest.raises(ValueError, match="twice"):
        T.read_vocab(tmp_path / "v.txt")


def test_load_tokenizer_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        T.load_tokenizer(tmp_path)


# ---- the algorithm in plain Python -----------------------------------------------------------------------------


def test_reference_wordpiece_equals_the_library(bert, heldout_sentences):
    vocab = bert.get_vocab()
    words = {w for text in heldout_sentences for w in T.pre_tokenize(bert, text)}
    words |= {"unaffable", "x" * 101, "☃", "pemberley"}
    assert len(words) > 3000
    for word in words:
        assert T.wordpiece_word(word, vocab) == bert.tokenize(word), word


def test_wordpiece_steps_trace():
    pieces, steps = T.wordpiece_steps("unaffable", T.bert_tokenizer().get_vocab())
    assert pieces == ["una", "##ffa", "##ble"]
    assert [s.candidate for s in steps if s.found] == pieces
    assert steps[0] == T.WordPieceStep(0, 9, "unaffable", False)
    assert len(steps) == 7 + 4 + 1  # unaffable…una, ##ffable…##ffa, ##ble


def test_wordpiece_unk_is_the_whole_word():
    assert T.wordpiece_word("unz", {"un", "##z"}) == ["un", "##z"]
    assert T.wordpiece_word("unz", {"un"}) == ["[UNK]"]
    assert T.wordpiece_word("ab", {"a", "b"}) == ["[UNK]"]  # b is in the vocab, ##b is not
    with pytest.raises(TypeError, match="string"):
        T.wordpiece_word(3, {"a"})


def test_pre_tokenize(bert):
    assert T.pre_tokenize(bert, "Don't STOP, Zoë!") == ["don", "'", "t", "stop", ",", "zoe", "!"]
    with pytest.raises(TypeError, match="string"):
        T.pre_tokenize(bert, ["a"])


# ---- words and pieces ------------------------------------------------------------------------------------------


def test_word_ids_and_the_fallback_agree(bert, heldout_sentences):
    assert T.word_ids(bert, "the unaffable dog") == [None, 0, 1, 1, 1, 2, None]
    for text in heldout_sentences[:100]:
        tokens = bert.convert_ids_to_tokens(bert(text)["input_ids"])
        if "[UNK]" not in tokens:
            assert T.word_ids_from_pieces(tokens) == T.word_ids(bert, text)
    with pytest.raises(TypeError, match="list of token"):
        T.word_ids_from_pieces("una ##ffa")
    with pytest.raises(TypeError, match="string"):
        T.word_ids(bert, ["a"])


def test_whole_word_groups_match_exercise(bert):
    tokens = ["[CLS]", "the", "una", "##ffa", "##ble", "dog", "[SEP]", "[PAD]"]
    ids = T.word_ids_from_pieces(tokens)
    assert ids == [None, 0, 1, 1, 1, 2, None, None]
    assert T.whole_word_groups(ids) == [[1], [2, 3, 4], [5]] == exercises.solution("02.4")(tokens)


def test_token_stats_by_hand(bert):
    stats = T.token_stats(bert, ["The unaffable dog ☃.", "  "])
    # the | una ##ffa ##ble | dog | [UNK] | .
    assert (stats.words, stats.tokens, stats.unk_tokens) == (5, 7, 1)
    assert stats.pieces_per_word == {1: 4, 3: 1}
    assert stats.mean_pieces_per_word == pytest.approx(7 / 5)
    assert stats.whole_word_fraction == pytest.approx(3 / 5)
    assert stats.split_fraction == pytest.approx(1 / 5)
    assert stats.unk_rate == pytest.approx(1 / 7)
    assert list(T.words_as_pieces(bert, ["una ☃"])) == [("una",), ("[UNK]",)]


def test_token_stats_errors(bert):
    with pytest.raises(ValueError, match="empty"):
        T.token_stats(bert, [])
    with pytest.raises(TypeError, match="not one string"):
        T.token_stats(bert, "some text")
    with pytest.raises(TypeError, match="strings only"):
        T.token_stats(bert, ["ok", 3])
    with pytest.raises(ValueError, match="no words"):
        T.token_stats(bert, ["\u0000"])


def test_vocab_overlap_by_hand(bert):
    o = T.vocab_overlap(["[PAD]", "a", "b", "c"], ["b", "c", "d", "[UNK]"])
    assert (o.size_a, o.size_b, o.shared, o.only_a, o.only_b) == (3, 3, 2, ("a",), ("d",))
    assert o.jaccard == pytest.approx(2 / 4) and o.fraction_of_a_in_b == pytest.approx(2 / 3)
    self_overlap = T.vocab_overlap(bert, bert)
    assert self_overlap.shared == len(bert) - 5 and self_overlap.jaccard == 1
    with pytest.raises(TypeError, match="not one string"):
        T.vocab_overlap("abc", bert)


def test_masked_piece_lookup(bert):
    lexicon = Counter({("pe", "##mber", "##ley"): 3, ("pe", "##rson", "##ley"): 1, ("una", "##ffa", "##ble"): 1})
    assert T.guess_masked_piece(["pe", "[MASK]", "##ley"], 1, lexicon) == "##mber"
    assert T.guess_masked_piece(["una", "[MASK]", "##ley"], 1, lexicon) is None
    with pytest.raises(ValueError, match="not a position"):
        T.guess_masked_piece(["a"], 1, lexicon)
    train = ["Pemberley, Pemberley and Pemberley."]
    assert T.masked_piece_leak(bert, train, ["At Pemberley."], seed=0) == (1, 1)
    assert T.masked_piece_leak(bert, train, ["At the unaffable Pemberley."], seed=0)[1] == 2
    assert T.piece_lexicon(bert, train) == Counter({("pe", "##mber", "##ley"): 3})


# ---- training --------------------------------------------------------------------------------------------------


def test_trained_tokenizer_has_bert_pipeline(small_trained):
    tok = small_trained
    assert len(tok) <= 1200
    assert [tok.convert_tokens_to_ids(t) for t in T.SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (
        0, 1, 2, 3, 4)
    enc = tok("Café, she said.", "Yes!")
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and tokens[-1] == "[SEP]"
    assert "cafe" in "".join(t.removeprefix("##") for t in tokens)  # lower-cased and accent-stripped
    assert enc["token_type_ids"] == [0] * (tokens.index("[SEP]") + 1) + [1] * (len(tokens) - tokens.index("[SEP]") - 1)
    assert any(t.startswith("##") for t in tok.get_vocab())
    assert tok.model_max_length == 512


def test_trained_tokenizer_round_trip(small_trained, tmp_path, heldout_sentences):
    small_trained.save_pretrained(tmp_path)
    again = T.load_tokenizer(tmp_path)
    assert again.get_vocab() == small_trained.get_vocab()
    for text in heldout_sentences[:50]:
        a, b = small_trained(text), again(text)
        assert a["input_ids"] == b["input_ids"] and a.word_ids() == b.word_ids()
        words = T.pre_tokenize(again, text)
        assert max(w for w in b.word_ids() if w is not None) == len(words) - 1
        tokens = again.convert_ids_to_tokens(b["input_ids"])
        for k, word in enumerate(words):  # the pieces of word k spell word k
            pieces = [t for t, w in zip(tokens, b.word_ids(), strict=True) if w == k]
            assert pieces == ["[UNK]"] or "".join(p.removeprefix("##") for p in pieces) == word


def test_trained_vocab_txt(small_trained, tmp_path):
    path = T.save_vocab_txt(small_trained, tmp_path / "vocab.txt")
    assert T.read_vocab(path) == small_trained.get_vocab()


def test_train_wordpiece_errors():
    with pytest.raises(ValueError, match="empty"):
        T.train_wordpiece([], 500)
    with pytest.raises(ValueError, match="empty"):
        T.train_wordpiece(["  ", ""], 500)
    with pytest.raises(TypeError, match="not one string"):
        T.train_wordpiece("the cat sat", 500)
    with pytest.raises(TypeError, match="strings only"):
        T.train_wordpiece(["the cat", None], 500)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        T.train_wordpiece(["the cat"], 500.0)
    with pytest.raises(ValueError, match="no room"):
        T.train_wordpiece(["the cat"], 5)
    with pytest.raises(ValueError, match="min_frequency"):
        T.train_wordpiece(["the cat"], 500, min_frequency=0)
    # "the cat sat": 5 specials + t h e c a s + ##h ##e ##a ##t = 15 entries at least
    with pytest.raises(ValueError, match="smaller than the 15 entries"):
        T.train_wordpiece(["the cat sat"] * 3, 10)
    assert len(T.train_wordpiece(["the cat sat"] * 3, 15)) == 15


# ---- the shipped course vocab ----------------------------------------------------------------------------------


def test_course_tokenizer_ships_and_loads_offline():
    folder = corpus.course_tokenizer_dir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "README.md"):
        assert (folder / name).is_file(), name
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert len(tok) == 8192 and T.course_tokenizer().get_vocab() == tok.get_vocab()
    assert T.read_vocab(folder / "vocab.txt") == tok.get_vocab()
    assert [tok.convert_tokens_to_ids(t) for t in T.SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert tok.model_max_length == 512
    enc = tok("Elizabeth smiled.")
    assert enc["input_ids"][0] == 2 and enc["input_ids"][-1] == 3
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA" in readme and "not deterministic" in readme


def test_course_vocab_is_better_on_austen_and_worse_on_wikipedia():
    """The course vocab (8 k) splits Wikipedia words more than bert's 30 k; on Austen they are close."""
    course, bert = T.course_tokenizer(), T.bert_tokenizer()
    wiki = corpus.pretraining_paragraphs("heldout", ["wikipedia"])
    assert T.token_stats(course, wiki).mean_pieces_per_word > T.token_stats(bert, wiki).mean_pieces_per_word + 0.1
    austen = corpus.pretraining_paragraphs("heldout", ["austen"])
    a, b = T.token_stats(course, austen), T.token_stats(bert, austen)
    assert abs(a.mean_pieces_per_word - b.mean_pieces_per_word) < 0.02


# ---- exercises use the real tokenizer --------------------------------------------------------------------------


def test_exercise_answers_come_from_the_tokenizer(bert):
    assert exercises.solution("02.1") == bert("The cat sat.")["input_ids"]
    assert exercises.solution("02.2") == bert("How old are you?", "I am six.")["token_type_ids"]
    reference = exercises.solution("02.3")
    vocab = set(bert.get_vocab())
    for word in ["unaffable", "pemberley", "tokenization", "x" * 101, "☃"]:
        assert reference(word, vocab) == bert.tokenize(word)
