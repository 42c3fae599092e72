"""Exercise prompts and check messages in the notebook's language, chosen as the figures' is: Chinese in the 中文版
(a kernel in notebooks/zh/, or MLM_COURSE_LANG=zh), English otherwise, and English exactly as it printed before."""

import ast
import math
import re
from pathlib import Path

import pytest

from mlm_course import exercises
from mlm_course.exercises import Exercise, Text
from mlm_course.plots import language

ALL = exercises.all_exercises()
HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
PACKAGE = Path(exercises.__file__).parent


@pytest.fixture(params=["en", "zh"])
def lang(request, monkeypatch):
    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, request.param)
    return request.param


# (exercise, a common wrong answer, {language: how its line starts}); the English as printed before translation
WRONG = [
    ("03.6", "b", {"en": "❌ 03.6: in pretraining 85 % of the tokens were visible in every sentence",
                   "zh": "❌ 03.6：预训练时每个句子都有 85 % 的词元可见"}),
    ("07.5", "b", {"en": "❌ 07.5: one 95 % interval at 80 % accuracy on 1,057 sentences is about ±2.4 points",
                   "zh": "❌ 07.5：在 1,057 个句子上、准确率 80 % 时，95 % 区间约为 ±2.4 个百分点"}),
    ("07.6", "c", {"en": "❌ 07.6: a swap or a shuffle moves words without changing them",
                   "zh": "❌ 07.6：交换或打乱只移动词而不改变它们"}),
    ("10.5", "a", {"en": "❌ 10.5: a model trained on whole words would do better on them",
                   "zh": "❌ 10.5：用全词掩码训练的模型在整词上会做得更好"}),
    ("01.1", math.log10(0.2 * 0.05 * 0.5 * 0.1),
     {"en": "❌ 01.1: that is log10 (base 10). The course works in nats: use math.log (natural log), not math.log10.\n",
      "zh": "❌ 01.1：这是 log10（以 10 为底）。本课程以奈特为单位：用 math.log（自然对数），不要用 math.log10。\n"}),
    ("03.1", [1, 3, 14, 22], {"en": "❌ 03.1: 0.15 × 150 = 22.5 is an exact half: the original ran on Python 2",
                              "zh": "❌ 03.1：0.15 × 150 = 22.5 恰好是一半：原始实现运行在 Python 2 上"}),
]


@pytest.mark.parametrize(("exercise_id", "answer", "expected"), WRONG, ids=[case[0] for case in WRONG])
def test_check_prints_the_hint_of_a_wrong_answer_in_the_language(lang, capsys, exercise_id, answer, expected):
    exercises.check(exercise_id, answer)
    assert capsys.readouterr().out.startswith(expected[lang])


PROMPTS = {  # the whole prompt of a number exercise; English as before
    "en": "Code draws `u1 < 0.7` → [MASK]; otherwise `u2 < q` → random, else unchanged. Which q gives the mix "
          "70 % [MASK] / 20 % random / 10 % unchanged?",
    "zh": "代码先抽 `u1 < 0.7` → [MASK]；否则 `u2 < q` → 随机词元，再否则保持不变。"
          "哪个 q 能得到 70 % [MASK] / 20 % 随机 / 10 % 不变的替换比例？",
}
CHOICES = {  # the first line, option (c) and the last line of a multiple-choice prompt
    "en": ("A character BERT is scored on held-out poems twice: once with single characters masked, once with whole "
           "jieba words masked. Its accuracy on the masked characters falls sharply. What does that say?",
           "  (c) Most of the first score came from the rest of the word: one visible character of 明月 nearly gives "
           "the other away. A whole word hidden must come from the context, the harder task.",
           "Answer with one letter: a, b, c, d."),
    "zh": ("一个字级 BERT 在留出的诗句上被评两次分：一次掩码单个字，一次掩码整个 jieba 词。它在被掩码的字上的准确率大幅下降。"
           "这说明了什么？",
           "  (c) 第一个分数大多来自词的其余部分：明月 中一个可见的字几乎就泄露了另一个字。整个词被隐藏时，答案只能来自上下文，"
           "这个任务更难。",
           "请用一个字母作答：a, b, c, d。"),
}


def test_prompts_are_in_the_language(lang):
    assert exercises.get("03.2").prompt == PROMPTS[lang]
    lines = exercises.get("10.5").prompt.split("\n")
    assert (lines[0], lines[3], lines[-1]) == CHOICES[lang] and len(lines) == 6


GENERIC = {  # (answer to 03.6, how check's line reads)
    "en": [(..., "❌ 03.6: not answered yet: replace the ... with your answer and run the cell again.\n"),
           ("a", "✅ 03.6: correct.\n"),
           ("z", "❌ 03.6: answer with one of the letters a, b, c, d (a string such as 'a'), not 'z'.\n")],
    "zh": [(..., "❌ 03.6：尚未作答：把 ... 换成你的答案，再运行这个单元格。\n"),
           ("a", "✅ 03.6：正确。\n"),
           ("z", "❌ 03.6：请用字母 a, b, c, d 中的一个作答（一个字符串，如 'a'），而不是 'z'。\n")],
}


def test_the_generic_messages_are_in_the_language(lang, capsys):
    for answer, line in GENERIC[lang]:
        exercises.check("03.6", answer)
        assert capsys.readouterr().out == line
    could_not = {"en": "could not check this answer (ValueError: could not convert string to float: 'abc'). Code draws",
                 "zh": "无法检查这个答案（ValueError: could not convert string to float: 'abc'）。代码先抽"}
    assert exercises.grade("03.2", "abc").startswith(could_not[lang])
    whole = {"en": "the answer is a whole number; 6.5 is not one.", "zh": "答案是一个整数；6.5 不是整数。"}
    assert exercises.grade("04.4", 6.5) == whole[lang]


@pytest.mark.parametrize("exercise", ALL, ids=[ex.id for ex in ALL])
def test_every_exercise_has_its_prompt_and_choices_in_both_languages(exercise):
    texts = [exercise.text, *(text for _, text in exercise.choices)]
    for text in texts:
        assert isinstance(text, Text) and text.en.strip() and HAN.search(text.zh)
        assert set(NUMBER.findall(text.en)) <= set(NUMBER.findall(text.zh)), f"a number lost in {text.zh!r}"
    assert exercise.text.zh.count("\n") == exercise.text.en.count("\n")


def test_the_language_is_the_figures(monkeypatch, tmp_path):
    """No setting: the kernel's folder decides, as for figures (notebooks/zh/ → Chinese); JupyterLab's session name
    too; MLM_COURSE_LANG overrides both."""
    monkeypatch.delenv(language.LANGUAGE_ENV_VAR, raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    for folder, chinese in (("zh", True), ("notebooks", False)):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        assert bool(HAN.search(exercises.get("03.6").prompt)) is chinese
        assert (language.figure_language() == "zh") is chinese
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "zh" / "03_masking.ipynb"))
    assert HAN.search(exercises.grade("03.6", "b"))
    monkeypatch.setenv(language.LANGUAGE_ENV_VAR, "en")
    assert not HAN.search(exercises.grade("03.6", "b"))


def test_a_text_without_its_chinese_is_refused():
    for en, zh in (("a hint", ""), ("a hint", "a hint"), ("", "提示")):
        with pytest.raises(ValueError, match="Text needs an English text and its Chinese translation"):
            Text(en, zh)
    with pytest.raises(ValueError, match=r"the prompt of exercise zz.3: give it as Text\(english, chinese\)"):
        Exercise("zz.3", "an English prompt alone", lambda answer: None, lambda: 1)
    options = {"a": Text("right", "对"), "b": "wrong"}
    with pytest.raises(ValueError, match=r"zz.3 \(b\): give it as Text"):
        exercises.multiple_choice("zz.3", Text("Why?", "为什么？"), options, "a", {"b": Text("no", "不对")})
    with pytest.raises(ValueError, match="zz.3: the fallback hint: give it as Text"):
        exercises.numeric("zz.3", Text("give 2", "给出 2"), 2.0, wrong={3.0: Text("no", "不对")}, fallback="fb")
    assert "zz.3" not in exercises._REGISTRY


# ---- no learner-facing string literal in the exercises package outside Text(english, chinese) ---------------------
INTERNAL = {"after softmax", "no mask", "query mask", "wrong dim", "after unscale", "before unscale", "Text | None"}
DATA = {"_TEXT_62", "_REVIEWS_71"}  # sentences the checks run on, not messages


def _not_messages(tree: ast.AST) -> set[int]:
    """Ids of the nodes whose strings are not shown to a learner: docstrings, errors raised for a maintainer, the
    insides of Text(...) and of f-strings, operands of comparisons (an error message looked for), data."""
    skip = set()
    for node in ast.walk(tree):
        inside = []
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and node.body \
                and isinstance(node.body[0], ast.Expr):
            skip.add(id(node.body[0].value))
        if isinstance(node, ast.Raise | ast.JoinedStr) or (isinstance(node, ast.Call) and getattr(
                node.func, "id", None) in ("Text", "_as_text")):
            inside = [sub for sub in ast.walk(node) if sub is not node or isinstance(node, ast.Raise)]
        elif isinstance(node, ast.Compare):
            inside = [node.left, *node.comparators]
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in DATA for t in node.targets):
            inside = list(ast.walk(node))
        skip.update(map(id, inside))
    return skip


def untranslated(source: str) -> list[str]:
    """The string literals of ``source`` that read as English words (two or more, with a space) and are not inside
    ``Text(english, chinese)``."""
    tree = ast.parse(source)
    skip, found = _not_messages(tree), []
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.Constant | ast.JoinedStr):
            continue
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            continue
        plain = node.value if isinstance(node, ast.Constant) else "".join(
            v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if plain not in INTERNAL and " " in plain and len(re.findall(r"(?<![\w#])[A-Za-z]{2,}(?!\w)", plain)) >= 2:
            found.append(f"line {node.lineno}: {plain[:60]!r}")
    return found


@pytest.mark.parametrize("module", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_every_message_of_the_exercises_package_has_its_chinese(module):
    assert untranslated(module.read_text(encoding="utf-8")) == []


def test_the_scan_finds_an_untranslated_message():
    source = 'def _grade(x):\n    """Docstring."""\n    if x == "a b c":\n        raise ValueError("for a maintainer")\n' \
             '    return f"got {x}, not the answer" if x else Text("right as it is", "本来就对")\n'
    assert untranslated(source) == ["line 5: 'got {}, not the answer'"]


def test_the_chinese_uses_the_glossarys_terms():
    """notebooks/zh/GLOSSARY.md: never a term of its "不用" column (整词掩码, 批次, 验证集 …) in a Chinese text."""
    from test_translations import rejected_terms

    rejected = rejected_terms()
    for module in sorted(PACKAGE.glob("*.py")):
        source = module.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Text" and len(node.args) == 2:
                chinese = ast.get_source_segment(source, node.args[1])
                used = [term for term in rejected if term in chinese]
                assert not used, f"{module.name}: {used} where the glossary uses {[rejected[t] for t in used]}"
