"""scripts/build_chinese_assets.py: fortunes-zh entries parsed by hand-made examples (part numbers dropped), and the
variant characters of 全唐诗 standardised against OpenCC and zhconv (builder-only packages: skipped without them)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import build_chinese_assets as builder  # noqa: E402

ENTRY = "\x1b[32m题目: 《自责二首》\x1b[m\n\x1b[34m作者：朱淑真（１１３５－１１８０）\x1b[m\n{}\n"


def test_a_line_that_only_numbers_the_poems_of_a_set_is_dropped():
    text = ENTRY.format("其一\n春已归来人未归，\n其二\n闷无消遣只看诗。\n其十二\n")
    [poem] = builder.parse_fortunes(text, "song100")
    assert (poem["title"], poem["author"]) == ("自责二首", "朱淑真")
    assert poem["lines"] == ["春已归来人未归，", "闷无消遣只看诗。"]


def test_a_line_that_merely_starts_with_qi_is_kept():
    [poem] = builder.parse_fortunes(ENTRY.format("其一人，\n其二三四五。"), "song100")
    assert poem["lines"] == ["其一人，", "其二三四五。"]


def test_variants_that_t2s_keeps_become_their_standard_form_and_the_rest_stays():
    pytest.importorskip("opencc")
    pytest.importorskip("zhconv")
    standardise = builder.Standardiser()
    # 簷疎劒: variants t2s keeps; 醯 an exception; 乾 is t2s's to decide (乾坤 stays); 「」 punctuation; 檐 already standard
    assert standardise("簷前疎影劒，醯鸡乾坤「檐」") == "檐前疏影剑，醯鸡乾坤「檐」"
    assert standardise.replaced == {"簷→檐": 1, "疎→疏": 1, "劒→剑": 1}
    poem = standardise.poem({"title": "疎簷", "author": "劒客", "lines": ["簷簷"], "split": "train"})
    assert poem == {"title": "疏檐", "author": "剑客", "lines": ["檐檐"], "split": "train"}
    assert standardise.replaced["簷→檐"] == 4
