"""Auto-checked exercises: a right answer passes, a common wrong answer gets a specific hint.

Each chapter module (``ch01_why_log`` …) registers its exercises with :func:`register`. In a notebook::

    from mlm_course.exercises import check
    check("01.2", my_answer)          # prints ✅ or a hint

An answer left as ``...`` (the placeholder in the notebooks) is reported as "not answered yet", so a
notebook runs top to bottom before the learner has done anything.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Grader = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``grade(answer)`` returns None when right, else a hint for the learner.

    ``solution()`` builds the reference answer; ``wrong_answers`` are common mistakes that the tests prove
    are rejected with a hint.
    """

    id: str
    prompt: str
    grade: Grader
    solution: Callable[[], Any]
    wrong_answers: tuple[Any, ...] = field(default=())


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


def grade(exercise_id: str, answer: Any) -> str | None:
    """None when ``answer`` is right, else the hint (no printing)."""
    if answer is Ellipsis:
        return "not answered yet: replace the ... with your answer and run the cell again."
    exercise = get(exercise_id)
    try:
        return exercise.grade(answer)
    except Exception as exc:  # a malformed answer is a hint, not a crash
        return f"could not check this answer ({type(exc).__name__}: {exc}). {exercise.prompt}"


def check(exercise_id: str, answer: Any) -> None:
    """Print ✅ or the hint for ``answer`` (use :func:`grade` to get the verdict as a value)."""
    hint = grade(exercise_id, answer)
    if hint is None:
        _SOLVED.add(exercise_id)
    verdict = f"✅ {exercise_id}: correct." if hint is None else f"❌ {exercise_id}: {hint}"
    # one write, not print(): print writes the text and its "\n" separately, and a kernel that flushes its
    # output buffer in between stores the line as two output chunks
    sys.stdout.write(verdict + "\n")


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


def multiple_choice(exercise_id: str, question: str, options: dict[str, str], correct: str,
                    hints: dict[str, str]) -> Exercise:
    """Register an "explain why" question: the learner passes the letter of the best explanation, and each wrong
    letter gets its hint, which names the misconception behind it."""
    if correct not in options or set(hints) != set(options) - {correct}:
        raise ValueError(f"{exercise_id}: give one hint for every option except the correct one ({correct!r}).")
    letters = ", ".join(options)
    prompt = "\n".join([question, *(f"  ({letter}) {text}" for letter, text in options.items()),
                         f"Answer with one letter: {letters}."])

    def grade(answer: Any) -> str | None:
        letter = str(answer).strip().strip("()").lower()
        if letter not in options:
            return f"answer with one of the letters {letters} (a string such as 'a'), not {answer!r}."
        return None if letter == correct else hints[letter]

    wrong = (*(letter for letter in options if letter != correct), "z")
    return register(Exercise(exercise_id, prompt, grade, lambda: correct, wrong))


def unsolved(chapter: str | None = None) -> list[str]:
    """Ids (of ``chapter``, or all) that no :func:`check` call has accepted in this Python session."""
    return [ex.id for ex in all_exercises(chapter) if ex.id not in _SOLVED]


__all__ = ["Exercise", "register", "get", "all_exercises", "grade", "check", "solution", "solution_source",
           "unsolved", "multiple_choice"]
