"""Auto-checked exercises: a right answer passes, a common wrong answer gets a specific hint.

Each chapter module (``ch01_why_log`` …) registers its exercises with :func:`register`. In a notebook::

    from mlm_course.exercises import check
    check("01.2", my_answer)          # prints ✅ or a hint

An answer left as ``...`` (the placeholder in the notebooks) is reported as "not answered yet", so a
notebook runs top to bottom before the learner has done anything.

Every prompt and every message a learner reads is a :class:`Text`, English and Chinese side by side; it prints in
the notebook's language, chosen as the figures' is (:func:`mlm_course.plots.language.figure_language`: ``zh`` for
the 中文版 in ``notebooks/zh/`` or with ``MLM_COURSE_LANG=zh``). A prompt or hint without its Chinese is refused.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_HAN = re.compile(r"[\u4e00-\u9fff]")


def language() -> str:
    """``en`` or ``zh``: the language of the figures (:func:`~mlm_course.plots.language.figure_language`)."""
    from mlm_course.plots.language import figure_language

    return figure_language()


@dataclass(frozen=True)
class Text:
    """A text a learner reads, in English and in simplified Chinese; ``str(text)`` is the one of :func:`language`."""

    en: str
    zh: str

    def __post_init__(self) -> None:
        if not (isinstance(self.en, str) and self.en.strip() and isinstance(self.zh, str) and _HAN.search(self.zh)):
            raise ValueError(f"Text needs an English text and its Chinese translation, not {self.en!r}, {self.zh!r}.")

    def __str__(self) -> str:
        return self.zh if language() == "zh" else self.en


def _as_text(value: Any, what: str) -> Text:
    """``value`` if it is a :class:`Text`; a plain string (an untranslated text) is refused, naming ``what``."""
    if not isinstance(value, Text):
        raise ValueError(f"{what}: give it as Text(english, chinese), not {value!r}.")
    return value


Grader = Callable[[Any], "Text | None"]


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``grade(answer)`` returns None when right, else a hint for the learner (a :class:`Text`).

    ``text`` is the prompt in both languages; ``prompt`` the one to show. ``solution()`` builds the reference
    answer; ``wrong_answers`` are common mistakes that the tests prove are rejected with a hint. ``choices`` are
    the (letter, text) options of a multiple-choice question.
    """

    id: str
    text: Text
    grade: Grader
    solution: Callable[[], Any]
    wrong_answers: tuple[Any, ...] = field(default=())
    choices: tuple[tuple[str, Text], ...] = field(default=())

    def __post_init__(self) -> None:
        _as_text(self.text, f"the prompt of exercise {self.id}")

    @property
    def prompt(self) -> str:
        """The prompt in the notebook's language."""
        return str(self.text)


_REGISTRY: dict[str, Exercise] = {}
_SOLVED: set[str] = set()  # ids accepted by check() in this session (the solutions notebook asserts all are)
_LOADED = False


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the registry (ids are unique, e.g. "01.3")."""
    if exercise.id in _REGISTRY:
        raise ValueError(f"exercise id {exercise.id!r} is registered twice; pick a new id")
    _REGISTRY[exercise.id] = exercise
    return exercise


def _load_chapters() -> None:
    global _LOADED
    if not _LOADED:
        for module in pkgutil.iter_modules(__path__):
            if module.name.startswith("ch"):
                importlib.import_module(f"{__name__}.{module.name}")
        _LOADED = True


def get(exercise_id: str) -> Exercise:
    """The exercise with this id; a clear error lists the known ids otherwise."""
    _load_chapters()
    try:
        return _REGISTRY[exercise_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"no exercise {exercise_id!r}; known exercises: {known}") from None


def all_exercises(chapter: str | None = None) -> list[Exercise]:
    """Every registered exercise, or those whose id starts with ``chapter`` (e.g. "01")."""
    _load_chapters()
    return [ex for key, ex in sorted(_REGISTRY.items()) if chapter is None or key.split(".")[0] == chapter]


NOT_ANSWERED = Text("not answered yet: replace the ... with your answer and run the cell again.",
                    "尚未作答：把 ... 换成你的答案，再运行这个单元格。")


def _hint(exercise: Exercise, answer: Any) -> Text | None:
    """The grader's verdict on ``answer``; a grader that raises gives the "could not check" hint."""
    if answer is Ellipsis:
        return NOT_ANSWERED
    try:
        return exercise.grade(answer)
    except Exception as exc:  # a malformed answer is a hint, not a crash
        error = f"{type(exc).__name__}: {exc}"
        return Text(f"could not check this answer ({error}). {exercise.text.en}",
                    f"无法检查这个答案（{error}）。{exercise.text.zh}")


def grade(exercise_id: str, answer: Any) -> str | None:
    """None when ``answer`` is right, else the hint in the notebook's language (no printing)."""
    hint = _hint(get(exercise_id), answer)
    return None if hint is None else str(hint)


def check(exercise_id: str, answer: Any) -> None:
    """Print ✅ or the hint for ``answer`` (use :func:`grade` to get the verdict as a value)."""
    hint = _hint(get(exercise_id), answer)
    if hint is None:
        _SOLVED.add(exercise_id)
        verdict = Text(f"✅ {exercise_id}: correct.", f"✅ {exercise_id}：正确。")
    else:
        verdict = Text(f"❌ {exercise_id}: {hint.en}", f"❌ {exercise_id}：{hint.zh}")
    # one write, not print(): print writes the text and its "\n" separately, and a kernel that flushes its
    # output buffer in between stores the line as two output chunks
    sys.stdout.write(f"{verdict}\n")


def solution(exercise_id: str) -> Any:
    """The reference answer (used by the solutions notebook and the tests)."""
    return get(exercise_id).solution()


def solution_source(exercise_id: str) -> str:
    """The code of the reference solution of a "write a function" exercise, to read.

    A solution declared as ``lambda: some_function`` shows ``some_function``'s code, not the lambda's line.
    """
    reference = get(exercise_id).solution
    if reference.__name__ == "<lambda>":
        reference = reference()
    if not callable(reference):
        raise ValueError(f"exercise {exercise_id} does not ask for a function: print solution({exercise_id!r}).")
    return textwrap.dedent(inspect.getsource(reference))


def _choice_prompt(question: Text, options: dict[str, Text]) -> Text:
    """The question, its lettered options and the request for one letter, in each language."""
    letters = ", ".join(options)

    def lines(lang: str, ask: str) -> str:
        return "\n".join([getattr(question, lang), *(f"  ({letter}) {getattr(text, lang)}"
                                                     for letter, text in options.items()), ask])

    return Text(lines("en", f"Answer with one letter: {letters}."), lines("zh", f"请用一个字母作答：{letters}。"))


def multiple_choice(exercise_id: str, question: Text, options: dict[str, Text], correct: str,
                    hints: dict[str, Text]) -> Exercise:
    """Register an "explain why" question: the learner passes the letter of the best explanation, and each wrong
    letter gets its hint, which names the misconception behind it."""
    if correct not in options or set(hints) != set(options) - {correct}:
        raise ValueError(f"{exercise_id}: give one hint for every option except the correct one ({correct!r}).")
    for letter, text in (*options.items(), *hints.items()):
        _as_text(text, f"{exercise_id} ({letter})")
    letters = ", ".join(options)

    def grade(answer: Any) -> Text | None:
        letter = str(answer).strip().strip("()").lower()
        if letter not in options:
            return Text(f"answer with one of the letters {letters} (a string such as 'a'), not {answer!r}.",
                        f"请用字母 {letters} 中的一个作答（一个字符串，如 'a'），而不是 {answer!r}。")
        return None if letter == correct else hints[letter]

    wrong = (*(letter for letter in options if letter != correct), "z")
    prompt = _choice_prompt(_as_text(question, exercise_id), options)
    return register(Exercise(exercise_id, prompt, grade, lambda: correct, wrong, tuple(options.items())))


@dataclass(frozen=True)
class Near:
    """A wrong value caught with its own tolerance (``math.isclose``), for a mistake whose band differs from the
    exercise's (``Near(0.0)`` is exactly 0)."""

    value: float
    rel_tol: float = 0.0
    abs_tol: float = 0.0


@dataclass(frozen=True)
class Between:
    """Every wrong value above ``low`` and up to ``high`` (either may be infinite), e.g. a share above 1."""

    low: float
    high: float


def _caught(key: Any, value: float, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(key, Between):
        return key.low < value <= key.high
    if isinstance(key, Near):
        return math.isclose(value, key.value, rel_tol=key.rel_tol, abs_tol=key.abs_tol)
    return math.isclose(value, key, rel_tol=rel_tol, abs_tol=abs_tol)


def _example(key: Any, whole: bool) -> float:
    """One value that ``key`` catches (what the tests feed the grader)."""
    if isinstance(key, Between):
        if math.isfinite(key.low) and math.isfinite(key.high):
            value = (key.low + key.high) / 2
        else:
            value = key.low + abs(key.low) + 1 if math.isfinite(key.low) else key.high - abs(key.high) - 1
    else:
        value = key.value if isinstance(key, Near) else key
    return round(value) if whole else value


def _wrong_entries(name: str, answer: float, wrong: Any, tol: tuple[float, float], whole: bool) -> list:
    """``wrong`` as (value, hint) pairs, a tuple of values sharing one hint split up; refuses a value the answer's
    tolerance accepts, a value an earlier one already catches, and (for whole-number answers) a fraction."""
    items = list(wrong.items()) if isinstance(wrong, Mapping) else list(wrong)
    entries = [(key, hint) for keys, hint in items for key in (keys if isinstance(keys, tuple) else (keys,))]
    if not entries:
        raise ValueError(f"{name}: declare at least one common wrong value with its hint.")
    for i, (key, hint) in enumerate(entries):
        if not isinstance(hint, Text):
            raise ValueError(f"{name}: give the wrong value {key!r} a hint, Text(english, chinese), not {hint!r}.")
        example = _example(key, whole)
        if not _caught(key, example, *tol):  # a fraction, or an empty band
            raise ValueError(f"{name}: the wrong value {key!r} holds no {'whole ' if whole else ''}number, as the "
                             f"answer {answer!r} does: declare it as the answer's kind of number.")
        if _caught(key, answer, *tol) or math.isclose(example, answer, rel_tol=tol[0], abs_tol=tol[1]):
            raise ValueError(f"{name}: the wrong value {key!r} is within tolerance of the answer {answer!r}; "
                             "remove it or tighten the tolerance.")
        earlier = next((k for k, _ in entries[:i] if _caught(k, example, *tol)), None)
        if earlier is not None:
            raise ValueError(f"{name}: the wrong value {key!r} is already caught by {earlier!r}, so its hint could "
                             "never be shown; declare each mistake once.")
    return entries


def numeric_grader(name: str, answer: float, *, wrong: Mapping[Any, Text] | Sequence[tuple[Any, Text]],
                   fallback: Text, rel_tol: float | None = None, abs_tol: float | None = None,
                   whole: bool | None = None, not_whole: Text | None = None) -> tuple[Grader, tuple[Any, ...]]:
    """The grader of a number and the wrong answers that prove it, from one declaration.

    The grader accepts ``answer`` within ``rel_tol``/``abs_tol`` (default 1e-4/1e-6, as ``math.isclose``), returns
    the hint of the first ``wrong`` value within that tolerance (a key may be a number, a :class:`Near` with its own
    tolerance, a :class:`Between` band, or a tuple of these sharing one hint), else ``fallback``. A whole-number
    answer (``whole``, by default when ``answer`` is an int) is matched exactly and a fraction gets ``not_whole``.
    The wrong answers are one example of every wrong value, one that gets ``fallback`` (and a fraction if whole).
    """
    whole = isinstance(answer, int) if whole is None else whole
    if isinstance(answer, bool) or not isinstance(answer, int | float) or not math.isfinite(answer):
        raise ValueError(f"{name}: the answer must be a finite int or float, not {answer!r}.")
    if whole and (rel_tol is not None or abs_tol is not None or answer != int(answer)):
        raise ValueError(f"{name}: a whole-number answer is matched exactly: give an int answer and no tolerance, "
                         "or pass whole=False.")
    tol = (0.0, 0.0) if whole else (1e-4 if rel_tol is None else rel_tol, 1e-6 if abs_tol is None else abs_tol)
    entries = _wrong_entries(name, answer, wrong, tol, whole)
    _as_text(fallback, f"{name}: the fallback hint")
    if not_whole is not None:
        _as_text(not_whole, f"{name}: the not_whole hint")

    def hint_for(value: float) -> Text | None:
        if math.isclose(value, answer, rel_tol=tol[0], abs_tol=tol[1]):
            return None
        return next((hint for key, hint in entries if _caught(key, value, *tol)), fallback)

    def grade(given: Any) -> Text | None:
        if not whole:
            return hint_for(float(given))
        fraction = not_whole or Text(f"the answer is a whole number; {given!r} is not one.",
                                     f"答案是一个整数；{given!r} 不是整数。")
        if isinstance(given, float) and not given.is_integer():  # inf and nan too
            return fraction
        value = int(given)  # a string or a tensor too
        return fraction if not isinstance(given, int) and float(given) != value else hint_for(value)

    tries = (2 * answer + 1, -3 * answer - 7, 10 * answer + 123.5, 7919.5)
    off = next((v for v in ((round(t) if whole else t) for t in tries) if hint_for(v) == fallback), None)
    if off is None:
        raise ValueError(f"{name}: the wrong values catch every number tried for the fallback hint; narrow them.")
    examples = (*(_example(key, whole) for key, _ in entries), off, *((answer + 0.5,) if whole else ()))
    return grade, examples


def numeric(exercise_id: str, prompt: Text, answer: float, *,
            wrong: Mapping[Any, Text] | Sequence[tuple[Any, Text]], fallback: Text, **tolerance: Any) -> Exercise:
    """Register a number-answer exercise declared as data: the answer, its tolerance (``rel_tol``, ``abs_tol``,
    ``whole``, ``not_whole``: see :func:`numeric_grader`) and ``{common wrong value: its hint}``."""
    grade, wrong_answers = numeric_grader(exercise_id, answer, wrong=wrong, fallback=fallback, **tolerance)
    return register(Exercise(exercise_id, prompt, grade, lambda: answer, wrong_answers))


@contextmanager
def one_torch_thread():
    """Torch on one thread while a grader runs its tiny model: on a busy machine two threads that wait for each
    other made such checks up to 40 times slower (measured on 2 shared cores). The thread count is restored."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def unsolved(chapter: str | None = None) -> list[str]:
    """Ids (of ``chapter``, or all) that no :func:`check` call has accepted in this Python session."""
    return [ex.id for ex in all_exercises(chapter) if ex.id not in _SOLVED]


__all__ = ["Text", "language", "Exercise", "register", "get", "all_exercises", "grade", "check", "solution", "solution_source",
           "unsolved", "multiple_choice", "numeric", "numeric_grader", "Near", "Between", "one_torch_thread"]
