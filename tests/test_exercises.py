"""Every registered exercise accepts its reference solution and rejects each listed wrong answer."""

import pytest

from mlm_course import exercises
from mlm_course.exercises import Exercise

ALL = exercises.all_exercises()


def test_registry_is_not_empty():
    assert ALL, "no exercises are registered"


@pytest.mark.parametrize("exercise", ALL, ids=[ex.id for ex in ALL])
def test_reference_solution_passes(exercise):
    assert exercises.grade(exercise.id, exercise.solution()) is None


@pytest.mark.parametrize("exercise", ALL, ids=[ex.id for ex in ALL])
def test_each_wrong_answer_gets_a_hint(exercise):
    assert exercise.wrong_answers, f"{exercise.id} lists no wrong answer to prove its check can fail"
    for wrong in exercise.wrong_answers:
        hint = exercises.grade(exercise.id, wrong)
        assert isinstance(hint, str) and hint, f"{exercise.id} accepted the wrong answer {wrong!r}"


def test_placeholder_is_not_answered_yet(capsys):
    first = ALL[0]
    exercises.check(first.id, ...)
    assert "❌" in capsys.readouterr().out and "not answered yet" in exercises.grade(first.id, ...)


def test_check_prints_a_tick_for_the_solution(capsys):
    first = ALL[0]
    exercises.check(first.id, first.solution())
    assert capsys.readouterr().out.startswith(f"✅ {first.id}")


def test_unknown_id_lists_known_ids():
    with pytest.raises(KeyError, match="known exercises"):
        exercises.get("99.99")


def test_duplicate_id_is_refused():
    first = ALL[0]
    with pytest.raises(ValueError, match="registered twice"):
        exercises.register(Exercise(first.id, "dup", lambda a: None, lambda: None))


def test_a_crashing_grader_becomes_a_hint():
    ex = Exercise("zz.1", "give a number", lambda a: None if a + 1 == 2 else "no", lambda: 1, ("x",))
    exercises._REGISTRY[ex.id] = ex
    try:
        assert "could not check" in exercises.grade("zz.1", "text")
    finally:
        del exercises._REGISTRY[ex.id]
