"""Build the CJK font the Chinese figures are set in, from a Debian package; nothing by hand.

    .venv/bin/python scripts/build_cjk_font.py        # ≈ 57 MB download, ≈ 30 s

Input (sha256 pinned below; a different download is reported): Debian ``fonts-noto-cjk`` 1:20220127+repack1-1
(``apt-get download``), ``usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc``, face 2 (Noto Sans CJK SC),
SIL Open Font License 1.1, © 2014-2021 Adobe, with Reserved Font Name "Source".

Output in ``mlm_course/data/fonts/``: ``CourseCJKSans-Regular.otf``, a subset of that face (every character of
GB 2312, every character of the course's Chinese poems, every character of the Chinese figure labels and every
CJK character of the notebooks (both editions: the site of ``make book`` draws them in this font), plus
printable ASCII), its hinting dropped; ``OFL.txt`` (the licence and where the font comes from);
``sources.json`` (input, output, character counts). A subset is a Modified Version under the OFL, so it is renamed
"Course CJK Sans" (no reserved name, and no clash with a full Noto Sans CJK a learner has installed). The build
is deterministic: a rerun writes the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from build_assets import sha256_file  # noqa: E402

from mlm_course.plots import language  # noqa: E402

OUT = ROOT / "mlm_course" / "data" / "fonts"
DEB = ("fonts-noto-cjk", "1:20220127+repack1-1", "fonts-noto-cjk_1%3a20220127+repack1-1_all.deb",
       "4a2515eb6db3978b897fef9709ed0d2b1f4c6c4df4d83d6c4ef65f71f1b1f502")
MEMBER, FACE = "usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2
POEM_FILES = ("poems.jsonl.gz", "quantangshi.jsonl.gz")

OFL_HEADER = f"""CourseCJKSans-Regular.otf is a subset of Noto Sans CJK SC Regular (face {FACE} of NotoSansCJK-Regular.ttc
in the Debian package {DEB[0]} {DEB[1]}; upstream https://github.com/notofonts/noto-cjk), made by
scripts/build_cjk_font.py: only the characters of GB 2312, of the course's Chinese poems, of its Chinese
figure labels and the CJK characters of its notebooks are kept, hinting is dropped, and the family is renamed
"Course CJK Sans". It is distributed under the SIL Open Font License 1.1, below.

Copyright 2014-2021 Adobe (http://www.adobe.com/), with Reserved Font Name 'Source'.

"""


def fetch(folder: Path) -> Path:
    """The .deb in ``folder`` (downloaded when missing), checked against its pinned sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    deb = folder / DEB[2]
    if not deb.exists():
        subprocess.run(["apt-get", "download", f"{DEB[0]}={DEB[1]}"], cwd=folder, check=True)
    if sha256_file(deb) != DEB[3]:
        print(f"warning: {deb.name} has sha256 {sha256_file(deb)}, not the pinned {DEB[3]}", file=sys.stderr)
    return deb


def gb2312_characters() -> set[str]:
    """Every character GB 2312 encodes (its 7,445: 6,763 hanzi plus punctuation, kana, Greek, Cyrillic, …)."""
    found = set()
    for high in range(0xA1, 0xF8):
        for low in range(0xA1, 0xFF):
            try:
                found.add(bytes([high, low]).decode("gb2312"))
            except UnicodeDecodeError:
                continue
    return found


def poem_characters() -> set[str]:
    """Every character of the course's Chinese poem files (titles, authors and lines)."""
    found = set()
    for name in POEM_FILES:
        with gzip.open(ROOT / "mlm_course" / "data" / "chinese" / name, "rt", encoding="utf-8") as lines:
            for line in lines:
                poem = json.loads(line)
                found.update(poem["title"] + poem["author"] + "".join(poem["lines"]))
    return found


def notebook_characters() -> set[str]:
    """Every CJK character (book_site.CJK_RANGES) of the course's notebooks, both editions, and the glossary: the
    site (make book) draws them in this font, e.g. 東 of 02's "東京 Tokyo", which GB 2312 lacks."""
    from book_site import is_cjk

    files = [*(ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"), *(ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"),
             ROOT / "notebooks" / "zh" / "GLOSSARY.md"]
    text = "".join(path.read_text(encoding="utf-8") for path in files)
    return {c for c in set(text) if is_cjk(c)}


def characters() -> dict[str, set[str]]:
    """The characters to keep, by where they come from."""
    labels = set("".join(language.ZH_LABELS.values()))
    return {"gb2312": gb2312_characters(), "poems": poem_characters(), "labels": labels,
            "notebooks": notebook_characters(), "ascii": {chr(c) for c in range(0x20, 0x7F)}}


def subset_font(unpacked: Path, keep: set[str], out: Path) -> int:
    """Write the renamed, unhinted subset of the SC face (in the unpacked .deb) to ``out``; return its glyphs."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    font = TTCollection(str(unpacked / MEMBER)).fonts[FACE]
    options = subset.Options()
    options.hinting = False
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in keep))
    subsetter.subset(font)
    rename(font)
    font.recalcTimestamp = False  # keep the upstream date: a rerun writes the same bytes
    font.save(str(out))
    return len(font.getGlyphOrder())


def rename(font) -> None:
    """Family "Course CJK Sans", full name "Course CJK Sans Regular" in every name record and in the CFF table."""
    family, full, postscript = language.CJK_FAMILY, f"{language.CJK_FAMILY} Regular", "CourseCJKSans-Regular"
    names = {1: family, 3: f"{postscript};course-subset", 4: full, 6: postscript, 16: family}
    table = font["name"]
    for record in list(table.names):
        if record.nameID in names:
            table.setName(names[record.nameID], record.nameID, record.platformID, record.platEncID, record.langID)
    cff = font["CFF "].cff
    cff.fontNames = [postscript]
    top = cff.topDictIndex[0]
    top.FullName, top.FamilyName = full, family


def licence_text(unpacked: Path) -> str:
    """The OFL header above and the OFL 1.1 text from the package's copyright file (in the unpacked .deb)."""
    copyright_file = (unpacked / "usr/share/doc" / DEB[0] / "copyright").read_text(encoding="utf-8")
    start = copyright_file.index("\nLicense: SIL-1.1\n ") + len("\nLicense: SIL-1.1\n")
    body = copyright_file[start:].split("\n\n", 1)[0]  # the stanza ends at the first empty line
    lines = [line[1:] if line.startswith(" ") else line for line in body.splitlines()]
    return OFL_HEADER + "\n".join("" if line == "." else line for line in lines).strip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--downloads", type=Path, default=ROOT / "runs" / "font-downloads",
                        help="where the .deb is kept (reused when present)")
    args = parser.parse_args(argv)
    deb = fetch(args.downloads)
    groups = characters()
    keep = set().union(*groups.values())
    OUT.mkdir(parents=True, exist_ok=True)
    font_file = OUT / language.CJK_FONT_FILE
    with tempfile.TemporaryDirectory() as tmp:  # the .deb unpacked once, for the font and its licence
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        glyphs = subset_font(Path(tmp), keep, font_file)
        (OUT / "OFL.txt").write_text(licence_text(Path(tmp)), encoding="utf-8")
    record = {"input": {"package": DEB[0], "version": DEB[1], "sha256": sha256_file(deb), "member": MEMBER,
                        "face": FACE},
              "characters": {name: len(chars) for name, chars in groups.items()} | {"kept": len(keep)},
              "output": {"file": font_file.name, "glyphs": glyphs, "bytes": font_file.stat().st_size,
                         "sha256": sha256_file(font_file)}}
    (OUT / "sources.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(record["characters"]), record["output"]["bytes"], "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
