"""Build the Chinese assets of notebook 10 from the package registries (Debian, npm); nothing by hand.

    .venv/bin/python scripts/build_chinese_assets.py            # poems + character tokenizer (≈ 86 MB of downloads)
    .venv/bin/python scripts/build_chinese_assets.py --model    # … then pretrain the character BERT (one thread)

Inputs (sha256 pinned below; a different download is reported):

* Debian ``fortunes-zh`` 2.98 (``apt-get download``): ``usr/share/games/fortunes/tang300`` (300 Tang poems) and
  ``song100`` (100 Song poems). Entries are separated by ``%`` lines; title and author are wrapped in ANSI colour
  codes. The package is GPL-3.0+; the poems themselves are centuries old and in the public domain, and only their
  text (title, author, lines) is kept. Its third file, ``chinese`` (modern fortunes and quotations), is not read.
* npm ``chinese-poetry`` 2.0.1 (``npm pack``; MIT, © 2016 JackeyGao): ``dist/quantangshi/poet.tang.*.json``, the
  *Complete Tang Poems* (全唐诗) in traditional characters, converted to simplified ones with OpenCC's ``t2s``
  tables (PyPI ``opencc-python-reimplemented`` 0.1.7, Apache-2.0; used here only).

Two clean-ups apply to every poem: a line that only numbers the poems of a set (其一, 其二) is dropped, and variant
characters (异体字: 簷, 疎, 劒, …) that ``t2s`` leaves alone become their standard simplified form (檐, 疏, 剑) by
the single-character mainland table of PyPI ``zhconv`` 1.4.3 (GPL-2.0+, tables from MediaWiki; used here only, its
code and tables are not shipped), except where that form means something else (:data:`VARIANT_EXCEPTIONS`).

Outputs in ``mlm_course/data/``: ``chinese/poems.jsonl.gz`` (fortunes-zh's poems with their split),
``chinese/quantangshi.jsonl.gz`` (extra training poems), ``chinese/sources.json`` (inputs, outputs, rules, counts),
``chinese-char-bert/`` (the character tokenizer; with ``--model`` also the BERT, ``metrics.jsonl``,
``results.json`` and ``README.md``). Everything is deterministic: a rerun writes the same bytes (the model too, on
the same machine type with one thread).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from build_assets import sha256_bytes, sha256_file, write_jsonl_gz  # noqa: E402
from chinese_char_bert import SEQ_LEN, train_and_ship  # noqa: E402

from mlm_course import chinese, corpus  # noqa: E402

DATA = ROOT / "mlm_course" / "data"
OUT = DATA / "chinese"
MODEL_DIR = DATA / "chinese-char-bert"
DEB = ("fortunes-zh", "2.98", "fortunes-zh_2.98_all.deb",
       "211c5ddee59d0ae74ce01cbfd02f7c8714740bae1835d5661eb2254edd739105")
NPM = ("chinese-poetry", "2.0.1", "chinese-poetry-2.0.1.tgz",
       "25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86")
FORTUNE_FILES = {"tang300": "usr/share/games/fortunes/tang300", "song100": "usr/share/games/fortunes/song100"}
SPLIT_SEED = 20_250_101
HELDOUT_SHARE = 0.15
ALWAYS_HELDOUT = ("夜思", "李白")  # 静夜思 (床前明月光…), the fill-mask demo's poem
EXTRA_POEMS = 20_000  # Tang poems sampled from the regular ones of 全唐诗
EXTRA_SEED = 618
CLAUSE_MIN = 4  # a shared clause of this many characters or more counts as the same line
MIN_COUNT = 2  # characters seen fewer times in the training text become [UNK]
CJK = "\u3400-\u4dbf\u4e00-\u9fff\U00020000-\U0002ebef"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PART_NUMBER = re.compile(r"^其[一二三四五六七八九十]+$")  # 其一, 其二: which poem of a set, not a line of verse
VARIANT_EXCEPTIONS = {"醯": "酰"}  # 醯 (vinegar, 醯鸡) is not a variant of the chemistry coinage 酰
REGULAR_LINE = re.compile(rf"^(?:[{CJK}]{{5}}，[{CJK}]{{5}}|[{CJK}]{{7}}，[{CJK}]{{7}})[。？！；]$")


NOTICE = """Notices for the files of this folder (built by scripts/build_chinese_assets.py; see DATA.md)

poems.jsonl.gz: the text (title, author, lines) of the poems in the files tang300 and song100 of the Debian
package fortunes-zh 2.98 (https://salsa.debian.org/chinese-team/fortunes-zh; package GPL-3.0+, © 2001-2009
Yu Guanghui, 2015-2019 Mo Zhou, 2020-2021 xiao sheng wen). The poems were written in the Tang (618-907) and
Song (960-1279) dynasties and are in the public domain; only their text is taken, not the package's code,
formatting or other files.

quantangshi.jsonl.gz: poems of the Complete Tang Poems (全唐诗, public domain) from the npm package
chinese-poetry 2.0.1, converted to simplified characters with OpenCC's t2s tables (opencc-python-reimplemented
0.1.7, Apache-2.0) and zhconv's table of variant characters (zhconv 1.4.3). The collection is distributed under the
following licence:

"""


# ---- downloads ---------------------------------------------------------------------------------------------------


def fetch(folder: Path) -> dict[str, Path]:
    """The .deb and the npm tarball in ``folder`` (downloaded when missing), each checked against its pinned sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    deb, tgz = folder / DEB[2], folder / NPM[2]
    if not deb.exists():
        subprocess.run(["apt-get", "download", f"{DEB[0]}={DEB[1]}"], cwd=folder, check=True)
    if not tgz.exists():
        subprocess.run(["npm", "pack", f"{NPM[0]}@{NPM[1]}", "--pack-destination", str(folder)], check=True,
                       capture_output=True)
    for path, pinned in ((deb, DEB[3]), (tgz, NPM[3])):
        if sha256_file(path) != pinned:
            warnings.warn(f"{path.name} differs from the pinned download (sha256 {pinned}): the outputs may differ",
                          stacklevel=2)
    return {"deb": deb, "npm": tgz}


def fortune_texts(deb: Path) -> dict[str, str]:
    """The two poem files of the .deb, unpacked with ``dpkg-deb -x``."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        return {name: (Path(tmp) / member).read_text(encoding="utf-8") for name, member in FORTUNE_FILES.items()}


# ---- fortunes-zh's poems --------------------------------------------------------------------------------------------


def _header(line: str, prefix: str) -> str:
    text = ANSI.sub("", line).strip()
    return re.sub(rf"^{prefix}[:：]", "", text).strip()


def parse_fortunes(text: str, source: str) -> list[dict]:
    """Entries (separated by lines holding only ``%``) → ``{source, title, author, lines}``, ANSI codes removed;
    the title loses its 《》, the author the (full-width) years after the name, the poem its :data:`PART_NUMBER`
    lines."""
    poems = []
    for entry in re.split(r"\n%[ \t]*\n", text.strip("\n%")):
        rows = [row.strip() for row in entry.split("\n") if row.strip()]
        if len(rows) < 3 or "\x1b" not in rows[0] or "\x1b" not in rows[1]:
            raise ValueError(f"{source}: an entry without a coloured title and author: {entry[:80]!r}")
        title = _header(rows[0], "题目").replace("《", "").replace("》", "")
        author = re.sub(r"（.*）$", "", _header(rows[1], "作者"))
        lines = [ANSI.sub("", row) for row in rows[2:] if not PART_NUMBER.match(ANSI.sub("", row))]
        if any("\x1b" in line or "%" in line for line in lines):
            raise ValueError(f"{source}: {title}: a line still holds a control code or a separator")
        poems.append({"source": source, "title": title, "author": author, "lines": lines})
    return poems


def clauses(lines: list[str]) -> set[str]:
    """The clauses (text between punctuation marks) of ``CLAUSE_MIN`` characters or more."""
    parts = (part for line in lines for part in re.split(rf"[^{CJK}]+", line))
    return {part for part in parts if len(part) >= CLAUSE_MIN}


def split_poems(poems: list[dict]) -> list[dict]:
    """Each poem with its ``split``: 静夜思 and a seeded ``HELDOUT_SHARE`` of each source's other poems are held out;
    a training poem that shares a clause with a held-out one (a repeat) is dropped."""
    rng = random.Random(SPLIT_SEED)
    heldout: set[int] = set()
    for source in FORTUNE_FILES:
        indices = [i for i, p in enumerate(poems) if p["source"] == source]
        forced = {i for i in indices if (poems[i]["title"], poems[i]["author"]) == ALWAYS_HELDOUT}
        rest = [i for i in indices if i not in forced]
        heldout |= forced | set(rng.sample(rest, round(HELDOUT_SHARE * len(indices)) - len(forced)))
    banned = set().union(*(clauses(poems[i]["lines"]) for i in heldout))
    out = []
    for i, poem in enumerate(poems):
        if i in heldout:
            out.append({**poem, "split": "heldout"})
        elif not clauses(poem["lines"]) & banned:
            out.append({**poem, "split": "train"})
    return out


# ---- Tang poems of 全唐诗 ------------------------------------------------------------------------------------------


def _tang_members(tgz: Path) -> list[tuple[str, list[dict]]]:
    """``poet.tang.N.json`` of the npm tarball, in the order of N."""
    with tarfile.open(tgz) as tar:
        names = [m for m in tar.getnames() if re.search(r"quantangshi/poet\.tang\.\d+\.json$", m)]
        names.sort(key=lambda m: int(m.rsplit(".", 2)[1]))
        return [(name, json.loads(tar.extractfile(name).read())) for name in names]


def extra_tang_poems(tgz: Path, banned: set[str], standardise: Standardiser) -> tuple[list[dict], dict]:
    """Regular Tang poems (2–8 lines, each two clauses of 5 or 7 characters, all alike) in simplified characters
    (``t2s``, then ``standardise``), without repeats and without any poem sharing a clause with a held-out one;
    ``EXTRA_POEMS`` of them, sampled with a seed and kept in file order. Also the counts of what each rule removed."""
    import opencc

    t2s = opencc.OpenCC("t2s").convert

    def simplified(text: str) -> str:
        return standardise(t2s(text))

    counts = {"poems": 0, "regular": 0, "shares_a_heldout_clause": 0, "repeat": 0}
    kept, seen = [], set()
    for name, rows in _tang_members(tgz):
        for row in rows:
            counts["poems"] += 1
            lines = [simplified(line) for line in row["paragraphs"]]
            if not (2 <= len(lines) <= 8 and all(REGULAR_LINE.match(x) for x in lines) and len(set(map(len, lines))) == 1):
                continue
            counts["regular"] += 1
            if clauses(lines) & banned:
                counts["shares_a_heldout_clause"] += 1
            elif "".join(lines) in seen:
                counts["repeat"] += 1
            else:
                seen.add("".join(lines))
                kept.append({"source": "quantangshi", "split": "train", "title": simplified(row["title"]),
                             "author": simplified(row["author"]), "lines": lines, "file": name.split("/")[-1]})
    chosen = sorted(random.Random(EXTRA_SEED).sample(range(len(kept)), EXTRA_POEMS))
    counts["sampled"] = EXTRA_POEMS
    return [kept[i] for i in chosen], counts


# ---- variant characters ------------------------------------------------------------------------------------------


class Standardiser:
    """Call it on a text: each variant character (异体字) — a Han character that OpenCC's ``t2s`` keeps as it is but
    zhconv's mainland table changes into one other Han character — becomes that character, :data:`VARIANT_EXCEPTIONS` aside.
    ``replaced`` counts the replacements made so far, by variant."""

    def __init__(self) -> None:
        import opencc
        import zhconv

        self._t2s, self._zhconv = opencc.OpenCC("t2s").convert, zhconv.convert
        self._forms: dict[str, str] = {}
        self.replaced: dict[str, int] = {}

    def _form(self, ch: str) -> str:
        if ch not in self._forms:
            standard = self._zhconv(ch, "zh-cn")
            han = all(re.fullmatch(f"[{CJK}]", c) for c in ch + standard)  # not 「」 → “”: punctuation stays
            variant = han and len(standard) == 1 and standard != ch and self._t2s(ch) == ch
            self._forms[ch] = standard if variant and VARIANT_EXCEPTIONS.get(ch) != standard else ch
        return self._forms[ch]

    def __call__(self, text: str) -> str:
        out = "".join(self._form(ch) for ch in text)
        for old, new in zip(text, out, strict=True):
            if old != new:
                self.replaced[f"{old}→{new}"] = self.replaced.get(f"{old}→{new}", 0) + 1
        return out

    def poem(self, poem: dict) -> dict:
        """``poem`` with its title, author and lines standardised."""
        return {**poem, "title": self(poem["title"]), "author": self(poem["author"]),
                "lines": [self(line) for line in poem["lines"]]}


# ---- writing -------------------------------------------------------------------------------------------------------


def count(poems: list[dict]) -> dict:
    return {"poems": len(poems), "lines": sum(len(p["lines"]) for p in poems),
            "characters": sum(len(line) for p in poems for line in p["lines"])}


def build_text(downloads: Path) -> dict:
    """Write the two poem files and return the record for ``sources.json``."""
    paths = fetch(downloads)
    texts = fortune_texts(paths["deb"])
    fortunes_standard, tang_standard = Standardiser(), Standardiser()
    parsed = [fortunes_standard.poem(poem) for name, text in texts.items() for poem in parse_fortunes(text, name)]
    poems = split_poems(parsed)
    heldout = [p for p in poems if p["split"] == "heldout"]
    banned = set().union(*(clauses(p["lines"]) for p in heldout))
    extra, extra_counts = extra_tang_poems(paths["npm"], banned, tang_standard)
    with tarfile.open(paths["npm"]) as tar:
        licence = tar.extractfile("package/LICENSE").read().decode("utf-8")
    write_jsonl_gz(OUT / "poems.jsonl.gz", poems)
    write_jsonl_gz(OUT / "quantangshi.jsonl.gz", extra)
    (OUT / "NOTICE").write_bytes((NOTICE + licence).encode("utf-8"))
    splits = {f"{source}/{split}": count([p for p in poems if p["source"] == source and p["split"] == split])
              for source in FORTUNE_FILES for split in ("train", "heldout")}
    return {
        "inputs": {"deb": {"package": DEB[0], "version": DEB[1], "sha256": sha256_file(paths["deb"]),
                           "files": {name: {"path": FORTUNE_FILES[name], "sha256": sha256_bytes(text.encode())}
                                     for name, text in texts.items()}},
                   "npm": {"package": NPM[0], "version": NPM[1], "sha256": sha256_file(paths["npm"]),
                           "files": "package/dist/quantangshi/poet.tang.*.json"}},
        "outputs": {name: sha256_file(OUT / name) for name in ("poems.jsonl.gz", "quantangshi.jsonl.gz", "NOTICE")},
        "rules": {"heldout_share": HELDOUT_SHARE, "split_seed": SPLIT_SEED, "always_heldout": list(ALWAYS_HELDOUT),
                  "clause_min": CLAUSE_MIN, "extra_seed": EXTRA_SEED, "parsed": len(parsed),
                  "dropped_line": PART_NUMBER.pattern, "variant_exceptions": VARIANT_EXCEPTIONS,
                  "variants_replaced": {"fortunes-zh": fortunes_standard.replaced,
                                        "quantangshi (every poem read)": tang_standard.replaced},
                  "dropped_train_repeats": len(parsed) - len(poems)},
        "counts": {**splits, "quantangshi/train": count(extra), "quantangshi_filter": extra_counts},
    }


def build_tokenizer() -> dict:
    """The character tokenizer from the training text (every source's train split), saved in the model folder."""
    texts = [poem.text for poem in corpus.chinese_poems("train")]
    tokenizer = chinese.build_char_tokenizer(texts, min_count=MIN_COUNT, max_length=SEQ_LEN)
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(MODEL_DIR)
    counts = chinese.character_counts(texts)
    return {"vocab_size": len(tokenizer), "min_count": MIN_COUNT, "distinct_training_characters": len(counts),
            "training_characters": sum(counts.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--downloads", type=Path, default=ROOT / "runs" / "chinese-downloads",
                        help="where the .deb and the npm tarball are kept (reused when present)")
    parser.add_argument("--model", action="store_true", help="also pretrain the character BERT (one CPU thread)")
    args = parser.parse_args(argv)
    record = build_text(args.downloads)
    corpus._poem_records.cache_clear()
    record["tokenizer"] = build_tokenizer()
    (OUT / "sources.json").write_text(json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                                      encoding="utf-8")
    print(json.dumps(record["counts"], ensure_ascii=False), record["tokenizer"])
    if args.model:
        train_and_ship(MODEL_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
