"""Every registered exercise accepts its reference solution and rejects each listed wrong answer."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

from mlm_course import exercises
from mlm_course.exercises import Exercise, Text

ALL = exercises.all_exercises()
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")  # the numbers of a text, kept in its translation


def _t(english: str) -> Text:
    """A made-up exercise's text, with a stand-in translation."""
    return Text(english, f"中文：{english}")


def test_registry_is_not_empty():
    assert ALL, "no exercises are registered"


@pytest.mark.parametrize("exercise", ALL, ids=[ex.id for ex in ALL])
def test_reference_solution_passes(exercise):
    assert exercises.grade(exercise.id, exercise.solution()) is None


@pytest.mark.parametrize("exercise", ALL, ids=[ex.id for ex in ALL])
def test_each_wrong_answer_gets_a_hint(exercise):
    assert exercise.wrong_answers, f"{exercise.id} lists no wrong answer to prove its check can fail"
    for wrong in exercise.wrong_answers:
        hint = exercises._hint(exercise, wrong)  # a Text: English and Chinese
        assert isinstance(hint, Text), f"{exercise.id}: {wrong!r} was accepted or got an untranslated hint {hint!r}"
        assert set(NUMBER.findall(hint.en)) <= set(NUMBER.findall(hint.zh)), f"{exercise.id}: a number lost in {hint}"


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
        exercises.register(Exercise(first.id, _t("dup"), lambda a: None, lambda: None))


def test_a_crashing_grader_becomes_a_hint():
    ex = Exercise("zz.1", _t("give a number"), lambda a: None if a + 1 == 2 else _t("no"), lambda: 1, ("x",))
    exercises._REGISTRY[ex.id] = ex
    try:
        assert "could not check" in exercises.grade("zz.1", "text")
    finally:
        del exercises._REGISTRY[ex.id]


def test_unsolved_lists_what_check_has_not_accepted(capsys):
    exercises._SOLVED.discard("08.3")
    exercises.check("08.3", 5)  # a wrong answer is not recorded
    assert "08.3" in exercises.unsolved("08")
    exercises.check("08.3", exercises.solution("08.3"))
    assert "08.3" not in exercises.unsolved("08") and "08.3" not in exercises.unsolved()
    assert set(exercises.unsolved("08")) <= {ex.id for ex in exercises.all_exercises("08")}


def test_solution_source_is_the_reference_code():
    source = exercises.solution_source("08.4")
    assert source.startswith("def _solution_84") and "def paired_t(a, b):" in source


FUNCTION_EXERCISES = [ex for ex in ALL if callable(ex.solution())]


@pytest.mark.parametrize("exercise", FUNCTION_EXERCISES, ids=[ex.id for ex in FUNCTION_EXERCISES])
def test_solution_source_prints_the_code_of_the_reference_function(exercise):
    """The solutions notebook prints this: it must be the function's code, whatever way it was declared."""
    reference = exercise.solution()
    source = exercises.solution_source(exercise.id)
    assert f"def {reference.__name__}(" in source, source
    assert "lambda:" not in source


def test_solution_source_refuses_an_exercise_without_a_function():
    with pytest.raises(ValueError, match="does not ask for a function"):
        exercises.solution_source("01.1")


def test_multiple_choice_names_the_misconception_of_each_wrong_letter():
    options = {"a": _t("right"), "b": _t("wrong one"), "c": _t("wrong two")}
    ex = exercises.multiple_choice("zz.7", _t("Why?"), options, "a", {"b": _t("hint b"), "c": _t("hint c")})
    try:
        assert "(b) wrong one" in ex.prompt and "one letter: a, b, c" in ex.prompt
        assert [exercises.grade("zz.7", x) for x in ("a", " A ", "(a)")] == [None, None, None]
        assert exercises.grade("zz.7", "b") == "hint b" and exercises.grade("zz.7", "c") == "hint c"
        assert "one of the letters" in exercises.grade("zz.7", "e") and "'a'" in exercises.grade("zz.7", 3)
        assert set(ex.wrong_answers) == {"b", "c", "z"} and ex.choices == tuple(options.items())
    finally:
        del exercises._REGISTRY["zz.7"]
    with pytest.raises(ValueError, match="one hint for every option"):
        exercises.multiple_choice("zz.8", _t("Why?"), options, "a", {"b": _t("hint b")})
    assert "zz.8" not in exercises._REGISTRY


MULTIPLE_CHOICE = [ex for ex in ALL if ex.choices]


def test_multiple_choice_keys_give_nothing_away():
    """A learner who always answers one letter, or the longest option, must not score: the right letters are spread
    over the positions, and the right option is rarely the longest."""
    n = len(MULTIPLE_CHOICE)
    assert n >= 4, [ex.id for ex in MULTIPLE_CHOICE]
    right = {ex.id: ex.solution() for ex in MULTIPLE_CHOICE}
    shared = set.intersection(*({letter for letter, _ in ex.choices} for ex in MULTIPLE_CHOICE))
    counts = {letter: list(right.values()).count(letter) for letter in sorted(shared | set(right.values()))}
    assert max(counts.values()) <= math.ceil(n / 4) + 1 and all(counts[letter] for letter in shared), counts
    longest = [ex.id for ex in MULTIPLE_CHOICE
               if all(len(dict(ex.choices)[right[ex.id]].en) > len(text.en) for letter, text in ex.choices
                      if letter != right[ex.id])]
    assert len(longest) <= math.ceil(n / 4), f"the right option is the longest in {longest}"


def test_numeric_declaration_grades_and_lists_its_wrong_answers():
    from mlm_course.exercises import Between, Near

    wrong = {3.0: _t("h3"), (4.0, 5.0): _t("h45"), Near(0.0): _t("zero"), Near(10.0, abs_tol=1.0): _t("ten"),
             Between(100, math.inf): _t("big")}
    ex = exercises.numeric("zz.9", _t("give 2"), 2.0, wrong=wrong, fallback=_t("fb"))
    try:
        verdicts = {x: exercises.grade("zz.9", x) for x in (2.00019, 2.0003, 3.0002, 5, 0.0, 1e-9, 10.9, 11.1, 1e9)}
        assert verdicts == {2.00019: None, 2.0003: "fb", 3.0002: "h3", 5: "h45", 0.0: "zero", 1e-9: "fb",
                            10.9: "ten", 11.1: "fb", 1e9: "big"}  # rel_tol 1e-4 by default; Near(0.0) is exact
        assert ex.solution() == 2.0 and "could not check" in exercises.grade("zz.9", "two")
        assert ex.wrong_answers[:5] == (3.0, 4.0, 5.0, 0.0, 10.0) and ex.wrong_answers[5] > 100
        assert exercises.grade("zz.9", ex.wrong_answers[-1]) == "fb" and len(ex.wrong_answers) == 7
    finally:
        del exercises._REGISTRY["zz.9"]


def test_numeric_whole_number_answers_match_exactly():
    grade, wrong_answers = exercises.numeric_grader("zz", 7, wrong={8: _t("h8"), (1, 2): _t("h12")},
                                                    fallback=_t("fb"), not_whole=_t("whole!"))
    assert [None if grade(x) is None else grade(x).en for x in (7, 7.0, "7", 8, 2, 9, 7.5, 7.0000001, math.inf)] == [
        None, None, None, "h8", "h12", "fb", "whole!", "whole!", "whole!"]
    assert wrong_answers[:3] == (8, 1, 2) and grade(wrong_answers[3]) == _t("fb") and wrong_answers[4] == 7.5
    assert "not one" in exercises.numeric_grader("zz", 7, wrong={8: _t("h8")}, fallback=_t("fb"))[0](6.5).en
    with pytest.raises(ValueError, match="matched exactly"):
        exercises.numeric_grader("zz", 7, wrong={8: _t("h8")}, fallback=_t("fb"), abs_tol=0.5)
    with pytest.raises(ValueError, match="holds no whole number"):
        exercises.numeric_grader("zz", 7, wrong={8.5: _t("h")}, fallback=_t("fb"))


@pytest.mark.parametrize(("wrong", "message"), [
    ({2.0001: _t("h")}, "within tolerance of the answer"),  # rel_tol 1e-4 accepts 2.0001 as the answer
    ({exercises.Near(1.5, abs_tol=0.6): _t("h")}, "within tolerance of the answer"),
    ([(3.0, _t("h")), (3.0, _t("h again"))], "already caught by 3.0"),
    ({3.0: _t("h"), 3.0001: _t("h again")}, "already caught by 3.0"),
    ({(4.0, 4.0): _t("h")}, "already caught by 4.0"),
    ({}, "at least one"),
    ({3.0: ""}, "a hint"),
    ({3.0: "an English hint alone"}, "a hint, Text"),
    ({exercises.Between(5, 5): _t("h")}, "holds no number"),
])
def test_numeric_declaration_refuses_a_wrong_value_it_could_never_report(wrong, message):
    with pytest.raises(ValueError, match=message):
        exercises.numeric("zz.9", _t("give 2"), 2.0, wrong=wrong, fallback=_t("fb"))
    assert "zz.9" not in exercises._REGISTRY


# ---- the exercises that write the training step (06.2, 07.1, 07.7) and the sparse MLM head (04.3) -----------------

SPECIFIC_HINTS = {  # exercise → {name of a wrong answer: words its hint must contain}
    "04.3": {"head_at_without_bias": "add the output bias", "head_at_without_decoder": "word table as its weight",
             "head_at_projecting_every_position": "the head ran at 36 positions for 11 predictions",
             "head_at_unflattened": "index hidden.flatten(0, 1)", "head_at_calling_the_head": "instead of calling"},
    "06.2": {"my_step_without_zero_grad": "zero them in every step",
             "my_step_without_clipping": "applied gradients of norm 2.88: clip them",
             "my_step_clipping_after_the_update": "clipped after optimizer.step()",
             "my_step_without_scheduler_step": "the learning rate stayed at 2.5e-03",
             "my_step_scheduler_first": "used the second step's learning rate",
             "my_step_without_train_mode": "call model.train() first",
             "my_step_with_labels_input_ids": "labels=input_ids bug"},
    "07.1": {"my_finetune_step_without_attention_mask": "Pass batch['attention_mask']",
             "my_finetune_step_without_zero_grad": "zero them in every step",
             "my_finetune_step_without_clipping": "applied gradients of norm 3.00: clip them",
             "my_finetune_step_on_the_cls_hidden_state": "[CLS] hidden state",
             "my_finetune_step_on_probabilities": "applies log-softmax itself",
             "my_finetune_step_without_train_mode": "call model.train() first"},
    "07.7": {"my_amp_step_clipping_before_unscaling": "clipped while still multiplied by the scale",
             "my_amp_step_with_optimizer_step": "call scaler.step(optimizer) instead of optimizer.step()",
             "my_amp_step_without_update": "call scaler.update() at the end of every step",
             "my_amp_step_on_the_unscaled_loss": "did not go through scaler.scale(loss)",
             "my_amp_step_without_autocast": "the model ran in float32",
             "my_amp_step_with_a_float16_loss": "the loss you scaled was float16",
             "my_amp_step_without_zero_grad": "the gradients were not zeroed",
             "my_amp_step_without_moving_the_batch": "never moved with .to(device)"},
}


@pytest.mark.parametrize("exercise_id", sorted(SPECIFIC_HINTS))
def test_each_slip_in_a_written_step_or_head_gets_its_own_hint(exercise_id):
    wrong = {fn.__name__: fn for fn in exercises.get(exercise_id).wrong_answers}
    assert set(wrong) == set(SPECIFIC_HINTS[exercise_id])
    hints = {name: exercises.grade(exercise_id, fn) for name, fn in wrong.items()}
    for name, words in SPECIFIC_HINTS[exercise_id].items():
        assert words in hints[name], (name, hints[name])
    assert len(set(hints.values())) == len(hints), "two slips share a hint"


def _written_step(loss_fn):
    """A right step written another way: zero_grad first, model.zero_grad, the loss returned as a float."""

    def my_step(model, batch, optimizer, scheduler):
        model.zero_grad(set_to_none=False)
        model.train()
        loss = loss_fn(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        return loss.item()

    return my_step


def _dense_masked_lm_loss(model, batch):
    """Logits at every position, F.cross_entropy ignoring the -100 labels: the same loss as the sparse one (≈ 1e-6)."""
    import torch.nn.functional as F

    return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]).flatten(0, 1), batch["labels"].flatten())


def test_a_right_step_written_another_way_passes():
    from mlm_course.finetune import classification_loss

    assert exercises.grade("06.2", _written_step(_dense_masked_lm_loss)) is None
    assert exercises.grade("07.1", _written_step(classification_loss)) is None


def test_a_step_right_at_first_that_stops_learning_is_caught():
    from mlm_course.objective import masked_lm_loss

    reference, calls = exercises.solution("06.2"), []

    def my_step(model, batch, optimizer, scheduler):
        calls.append(1)
        if len(calls) <= 3:
            return reference(model, batch, optimizer, scheduler)
        return masked_lm_loss(model.train(), batch).detach()  # no update after the third call

    hint = exercises.grade("06.2", my_step)
    assert "must fall by more than 2.0 nats" in hint and len(calls) == 20


@pytest.mark.parametrize("exercise_id", ["06.2", "07.1"])
def test_the_written_step_is_written_out_and_grading_keeps_the_learners_torch_state(exercise_id):
    """The reference solution is the learner's step written out (the grader's reference is steps.training_step);
    grading leaves torch's random state and thread count as they were."""
    source = exercises.solution_source(exercise_id)
    assert "training_step" not in source and "steps." not in source
    assert all(part in source for part in ("model.train()", ".backward()", "clip_grad_norm_", "zero_grad()"))
    threads = torch.get_num_threads()
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    assert exercises.grade(exercise_id, exercises.solution(exercise_id)) is None
    assert torch.equal(torch.rand(3), expected) and torch.get_num_threads() == threads


def test_the_step_checks_batches_catch_what_they_must(one_torch_thread):
    """07.1's batch is padded (else a forgotten attention mask would pass); both first gradients exceed the clip."""
    from mlm_course import steps
    from mlm_course.exercises import ch06_pretraining, ch07_fine_tuning

    for check in (ch06_pretraining._STEP_62, ch07_fine_tuning._STEP_71):
        model, batch = check.build()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        assert float(steps.training_step(model, [batch], check.loss_fn, optimizer, scheduler)["grad_norm"]) > 2.5
    assert (batch["attention_mask"] == 0).any() and (batch["attention_mask"] == 1).all(1).any()


def test_the_paired_t_reference_equals_scipy_and_the_courses_statistics():
    from scipy import stats

    from mlm_course.statistics import paired_t as course_paired_t

    paired_t = exercises.solution("08.4")
    for a, b in [([0.71, 0.74, 0.72], [0.69, 0.70, 0.66]), ([1.0, 2.0, 4.0, 8.0], [3.0, 3.5, 2.0, 4.5])]:
        assert paired_t(a, b) == pytest.approx(stats.ttest_rel(a, b).statistic, rel=1e-12)
        assert paired_t(a, b) == pytest.approx(course_paired_t(a, b)["t"], rel=1e-12)


NOTEBOOKS = sorted(path for path in (Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb")
                   if not path.name.startswith("09_") and "_appendix_" not in path.name)  # the chapters


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_every_chapter_notebook_ends_with_its_exercises(notebook):
    """Notebook NN asks exactly the exercises registered as NN.k (3 to 7), in its last cells, in order."""
    chapter = notebook.name[:2]
    cells = json.loads(notebook.read_text())["cells"]
    asked = [re.search(r'check\("(\d\d\.\d)"', "".join(cell["source"])) for cell in cells if cell["cell_type"] == "code"]
    asked = [match.group(1) for match in asked if match]
    registered = [ex.id for ex in exercises.all_exercises(chapter)]
    assert 3 <= len(registered) <= 7, f"chapter {chapter} has {len(registered)} exercises"
    assert asked == registered
    last_code = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"][-len(registered):]
    assert all('check("' in "".join(cells[i]["source"]) for i in last_code), "the exercises are the last code cells"


def test_solutions_notebook_checks_every_exercise():
    solutions = json.loads((NOTEBOOKS[0].parent / "09_solutions.ipynb").read_text())
    source = "\n".join("".join(cell["source"]) for cell in solutions["cells"])
    checked = set(re.findall(r'check\("(\d\d\.\d)"', source))
    assert checked == {ex.id for ex in exercises.all_exercises()}
    assert "assert not missing" in source


def test_check_writes_its_verdict_in_one_piece(monkeypatch):
    """print() writes the text and its newline separately; a kernel flushing in between stored two output chunks."""
    import io
    import sys

    writes = []

    class Recorder(io.StringIO):
        def write(self, text):
            writes.append(text)
            return len(text)

    monkeypatch.setattr(sys, "stdout", Recorder())
    exercises.check("01.1", ...)
    exercises.check("01.1", exercises.solution("01.1"))
    assert len(writes) == 2 and all(w.endswith("\n") and w.count("\n") == 1 for w in writes), writes


def test_answers_of_chapters_01_to_04_against_the_libraries():
    """03.1 by the package's count, 03.3 by the tokenizer, 04.4 by transformers' own BERT-large layer."""
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    from mlm_course import bert, masking
    from mlm_course.tokenization import bert_tokenizer

    lengths = (3, 17, 90, 150)
    assert exercises.solution("03.1") == masking.num_to_predict(torch.tensor(lengths), masking.MaskSpec()).tolist()
    half_even = masking.num_to_predict(torch.tensor(lengths), masking.MaskSpec(rounding="half_even")).tolist()
    assert half_even != exercises.solution("03.1") and "Python 2" in exercises.grade("03.1", half_even)
    ids = torch.tensor(bert_tokenizer()("The cat sat on the mat.")["input_ids"])
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected[[2, 5, 6]] = True
    assert exercises.solution("03.3") == torch.where(selected, ids, -100).tolist()
    large = BertConfig(hidden_size=1024, intermediate_size=4096, num_attention_heads=16, num_hidden_layers=24)
    with torch.device("meta"):
        layer = BertLayer(large)
    assert exercises.solution("04.4") == sum(p.numel() for p in layer.parameters()) == 12_596_224
    assert exercises.solution("04.4") * 24 == bert.parameter_count(large)["encoder"]
