"""Train the course's own WordPiece vocabulary and ship it as a transformers tokenizer folder.

Run once: ``.venv/bin/python scripts/train_course_tokenizer.py`` (≈ 10–20 s on 2 CPU cores, offline).

* Input: the ``train`` split of the pretraining corpus (Jane Austen's six novels + the Wikipedia sample), read with
  :func:`mlm_course.corpus.pretraining_text`. The held-out split is never read, so held-out measurements of the
  tokenizer (notebook 02) and of models trained with it are fair.
* Recipe: :func:`mlm_course.tokenization.train_wordpiece` — vocab_size 8,192, min_frequency 2, limit_alphabet 1,000,
  lower-cased and accent-stripped, bert-base-uncased's pre-tokeniser, ``##`` continuation pieces; the specials get ids
  [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4.
* Output (``mlm_course.corpus.course_tokenizer_dir()``): ``tokenizer.json`` + ``tokenizer_config.json`` (what
  ``AutoTokenizer.from_pretrained`` reads), ``vocab.txt`` (one token per line, line number = id; what
  bert-base-uncased ships) and ``README.md`` (provenance and licence).

**Not reproducible byte for byte.** WordPiece training in ``tokenizers`` is not deterministic, even single-threaded:
a rerun gives a vocabulary of the same size and character, but about half the ids (and a few entries) differ. The
shipped folder is therefore *the* course tokenizer: checkpoints and notebooks depend on its ids, so do not rerun this
script unless you also retrain everything that uses it. ``--out`` writes elsewhere, to experiment safely.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import tokenizers
import transformers

from mlm_course import corpus
from mlm_course.tokenization import load_tokenizer, save_vocab_txt, token_stats, train_wordpiece

VOCAB_SIZE = 8192
MIN_FREQUENCY = 2
LIMIT_ALPHABET = 1000

README = """# course-wordpiece-8k: the course's own WordPiece vocabulary

A lower-cased WordPiece tokenizer with {size:,} entries, in the format of bert-base-uncased's tokenizer:
`AutoTokenizer.from_pretrained(this_folder)` loads it offline (`mlm_course.tokenization.course_tokenizer()`).

## How it was made
- Script: `scripts/train_course_tokenizer.py`, run on {date} with tokenizers {tokenizers_version},
  transformers {transformers_version}.
- Training text: the `train` split of the course's pretraining corpus (`mlm_course/data/corpus/train.jsonl.gz`:
  Jane Austen's six novels + the Wikipedia sample, {chars:,} characters). The held-out split was not used.
- Recipe: `tokenizers` `WordPieceTrainer`, vocab_size {size}, min_frequency {min_frequency}, limit_alphabet
  {limit_alphabet}; bert-base-uncased's normaliser (lower-case, strip accents, split Chinese characters), its
  pre-tokeniser (whitespace and punctuation), `##` continuation pieces, `[CLS] a [SEP] (b [SEP])` post-processing,
  model_max_length 512.
- Special tokens: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4 (bert-base-uncased has [PAD] 0, [UNK] 100,
  [CLS] 101, [SEP] 102, [MASK] 103). Read the ids from the tokenizer, never hard-code them.
- WordPiece training is not deterministic: rerunning the script gives different ids. This folder is the reference.

## Files
- `tokenizer.json`, `tokenizer_config.json`: the transformers tokenizer.
- `vocab.txt`: the same vocabulary, one token per line, line number = id.

## Licence
This vocabulary is derived from the text it was trained on, so it carries that text's terms: Jane Austen's novels
are in the public domain; the Wikipedia sample is text by Wikipedia's contributors under Creative Commons
Attribution-ShareAlike (CC BY-SA; the repository's DATA.md gives the details). As a work derived from that text, the
vocabulary is shared under the same CC BY-SA terms, with attribution to Wikipedia's contributors.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default: the shipped one)")
    args = parser.parse_args(argv)
    out: Path = args.out or corpus.course_tokenizer_dir()

    paragraphs = corpus.pretraining_paragraphs("train")
    chars = sum(len(p) for p in paragraphs)
    print(f"training WordPiece ({VOCAB_SIZE:,} entries) on {len(paragraphs):,} train paragraphs, {chars:,} chars")
    tokenizer = train_wordpiece(paragraphs, VOCAB_SIZE, min_frequency=MIN_FREQUENCY, limit_alphabet=LIMIT_ALPHABET)

    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out))
    save_vocab_txt(tokenizer, out / "vocab.txt")
    (out / "README.md").write_text(
        README.format(size=len(tokenizer), date=datetime.date.today().isoformat(), chars=chars,
                      tokenizers_version=tokenizers.__version__, transformers_version=transformers.__version__,
                      min_frequency=MIN_FREQUENCY, limit_alphabet=LIMIT_ALPHABET),
        encoding="utf-8",
    )

    reloaded = load_tokenizer(out)
    assert reloaded.get_vocab() == tokenizer.get_vocab(), "the saved tokenizer does not reload identically"
    stats = token_stats(reloaded, corpus.pretraining_paragraphs("heldout"))
    print(f"wrote {out}: {len(reloaded):,} entries; held-out: {stats.mean_pieces_per_word:.3f} pieces/word, "
          f"{stats.whole_word_fraction:.1%} whole words, [UNK] rate {stats.unk_rate:.4%}")


if __name__ == "__main__":
    sys.exit(main())
