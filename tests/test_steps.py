"""The training step: what it computes (against transformers' own loss and hand-computed schedules), gradient
accumulation, clipping, and that it is the one step the package has."""

import copy
import re
from pathlib import Path

import pytest
import torch

from mlm_course import steps
from mlm_course.bert_io import transformers_name
from mlm_course.masking import MaskSpec
from mlm_course.objective import masked_lm_loss
from mlm_course.pretraining import mask_blocks, pack_blocks

PACKAGE = Path(__file__).resolve().parents[1] / "mlm_course"


@pytest.fixture
def batch(bert_tok, sample_text):
    blocks = pack_blocks([sample_text], bert_tok, seq_len=32)[:8]
    return mask_blocks(blocks, bert_tok, MaskSpec(mask_rate=0.3), torch.Generator().manual_seed(0))


def optimiser(model, lr=1e-3, warmup=2, total=20):
    optimizer = torch.optim.AdamW(steps.parameter_groups(model, 0.01), lr=lr)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, steps.linear_schedule(warmup, total))


def test_the_schedule_warms_up_then_decays_to_zero():
    factor = steps.linear_schedule(warmup_steps=4, total_steps=10)
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(7) == pytest.approx(0.5) and factor(10) == 0.0 and factor(12) == 0.0


def test_no_weight_decay_on_biases_and_layernorms(tiny_model):
    model = tiny_model()
    decay, no_decay = steps.parameter_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim == 2 for p in decay["params"]) and decay["weight_decay"] == 0.01
    assert {names[id(p)] for p in no_decay["params"]} >= {"embeddings.norm.weight", "layers.0.attention.query.bias"}
    assert no_decay["weight_decay"] == 0.0


def test_the_first_step_reports_transformers_loss_and_the_loss_falls(tiny_model, batch):
    """The step's loss on the course's BERT is BertForMaskedLM's own loss on the same weights and batch; 20 steps
    on one batch bring it down."""
    from transformers import BertForMaskedLM

    model = tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    theirs = BertForMaskedLM(model.config).eval()
    state = {transformers_name(name): value for name, value in model.state_dict().items()}
    theirs.load_state_dict(state, strict=False)
    theirs.tie_weights()
    with torch.no_grad():
        expected = theirs(input_ids=batch["input_ids"], labels=batch["labels"]).loss
    optimizer, scheduler = optimiser(model, lr=3e-3)
    losses = [float(steps.training_step(model, [batch], masked_lm_loss, optimizer, scheduler)["loss"])
              for _ in range(20)]
    assert losses[0] == pytest.approx(float(expected), abs=1e-5)
    assert losses[-1] < losses[0] - 1.0


def test_two_micro_batches_update_like_one_batch_of_both():
    """Gradient accumulation: the mean losses of two halves, each divided by 2, give the gradient of the whole."""
    x, y = torch.randn(16, 3, generator=torch.Generator().manual_seed(0)), torch.randn(16, 1)

    def mse(model, part):
        return torch.nn.functional.mse_loss(model(part["x"]), part["y"])

    def update(parts):
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 1)
        optimizer, scheduler = optimiser(model, lr=0.1, warmup=0, total=5)
        steps.training_step(model, parts, mse, optimizer, scheduler, max_grad_norm=None)
        return model.weight.detach()

    whole = update([{"x": x, "y": y}])
    halves = update([{"x": x[:8], "y": y[:8]}, {"x": x[8:], "y": y[8:]}])
    torch.testing.assert_close(halves, whole, atol=1e-6, rtol=0)


def keep_targets(batch: dict, rows: slice, count: int) -> dict:
    """Rows ``rows`` of a masked batch with only its first ``count`` masked positions still labelled."""
    labels = batch["labels"][rows].clone()
    kept = (labels != -100).flatten().nonzero().flatten()
    assert len(kept) >= count
    labels.view(-1)[kept[count:]] = -100
    return {"input_ids": batch["input_ids"][rows], "labels": labels}


def test_micro_batches_with_unequal_masked_counts_give_the_gradient_of_one_batch(tiny_model, batch):
    """Accumulation is one big batch: micro-batches holding 2 and 26 masked tokens give the gradient of the one
    batch that holds all 28 (the sum of the per-token losses over the number of target tokens of the whole step),
    to 1e-5 in fp32, weight by weight. Averaging the two micro-batch means instead — what transformers did before
    4.46 — is far off."""
    small, large = keep_targets(batch, slice(0, 4), 2), keep_targets(batch, slice(4, 8), 26)
    whole = {key: torch.cat([small[key], large[key]]) for key in small}
    assert int(steps.count_targets(small)) == 2 and int(steps.count_targets(large)) == 26
    model = tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    before = copy.deepcopy(model.state_dict())
    reference = per_weight(model, steps.applied_gradient(model, [whole], masked_lm_loss))
    accumulated = per_weight(model, steps.applied_gradient(model, [small, large], masked_lm_loss))
    assert max(relative_differences(accumulated, reference)) <= 1e-5
    means = sum(steps.applied_gradient(model, [part], masked_lm_loss) for part in (small, large)) / 2
    assert max(relative_differences(per_weight(model, means), reference)) > 0.5
    assert all(torch.equal(value, before[name]) for name, value in model.state_dict().items())  # a copy trained


def relative_differences(ours, reference) -> list[float]:
    """Per weight tensor; not the attention keys' biases, whose true gradient is 0 (softmax ignores a shift) and
    whose computed one is rounding noise (≈ 1e-12)."""
    return [float((a - b).norm() / b.norm()) for a, b in zip(ours, reference, strict=True) if b.norm() > 1e-9]


def per_weight(model, flat: torch.Tensor) -> list[torch.Tensor]:
    return list(flat.split([p.numel() for p in model.parameters()]))


def test_the_step_targets_of_several_processes_scale_each_share():
    """With ``processes`` = P whose gradients DDP averages, each process's loss is P × (its summed loss) / (the
    step's targets over every process), so the average over the processes is the loss of one batch of all."""
    model = torch.nn.Linear(3, 2)
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 1, -100, 1, 0, -100])

    def loss_fn(m, b):
        return torch.nn.functional.cross_entropy(m(b["x"]), b["labels"], ignore_index=-100)

    def step_loss(part, **kwargs):
        trained = copy.deepcopy(model)
        optimizer, scheduler = optimiser(trained, lr=0.0)
        return float(steps.training_step(trained, [part], loss_fn, optimizer, scheduler, **kwargs)["loss"])

    first, second = {"x": x[:2], "labels": labels[:2]}, {"x": x[2:], "labels": labels[2:]}
    shares = [step_loss(part, step_targets=4, processes=2) for part in (first, second)]
    assert (shares[0] + shares[1]) / 2 == pytest.approx(float(loss_fn(model, {"x": x, "labels": labels}).detach()), rel=1e-6)


def test_clipping_reports_the_norm_before_and_applies_the_bound():
    model = torch.nn.Linear(4, 1)
    x = 100 * torch.ones(8, 4)
    applied = []
    optimizer, scheduler = optimiser(model, lr=0.0)
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: applied.append(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))))
    out = steps.training_step(model, [{"x": x}], lambda m, b: m(b["x"]).pow(2).mean(), optimizer, scheduler,
                              max_grad_norm=0.5)
    model.zero_grad()
    model(x).pow(2).mean().backward()
    by_hand = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    assert float(out["grad_norm"]) == pytest.approx(float(by_hand), rel=1e-6) and float(by_hand) > 0.5
    assert float(applied[0]) == pytest.approx(0.5, rel=1e-5)


def test_after_a_step_the_gradients_are_gone_and_the_schedule_moved(tiny_model, batch):
    model = tiny_model()
    optimizer, scheduler = optimiser(model, warmup=4)
    steps.training_step(model, [batch], masked_lm_loss, optimizer, scheduler)
    assert all(p.grad is None for p in model.parameters())
    assert scheduler.last_epoch == 1 and scheduler.get_last_lr()[0] == pytest.approx(1e-3 * 2 / 4)
    assert model.training


#: What only a training step does: backward, the optimiser's step, the schedule's step.
TRAINING_CALLS = {
    "backward": r"\.backward\(",
    "optimiser step": r"optimi[sz]er\w*\.step\(|\.step\((self\.)?optimi[sz]er",
    "schedule step": r"sched\w*\.step\(",
}

#: The files that may make such calls, with what each call is for. Nothing else in mlm_course/, benchmarks/ or
#: scripts/ may: a benchmark or script that trains calls steps.training_step (or transformers.Trainer, the
#: comparison, whose steps happen inside transformers and match nothing here).
ALLOWED = {
    "mlm_course/steps.py": ({"backward", "optimiser step", "schedule step"}, "the one training step"),
    "mlm_course/train.py": ({"backward", "optimiser step", "schedule step"},
                            "train_with_accelerate: the loop's step as Accelerate runs it (accelerator.backward)"),
    "mlm_course/exercises/amp_step_check.py": ({"backward", "optimiser step", "schedule step"},
                                               "exercise 07.7's checker: the reference mixed-precision step"),
    "mlm_course/exercises/step_check.py": ({"backward", "optimiser step", "schedule step"},
                                           "the exercise checker: the slipped steps it grades learners' steps with"),
    "mlm_course/exercises/ch06_pretraining.py": ({"backward", "optimiser step", "schedule step"},
                                                 "exercise 06.2's worked solution, the step a learner writes"),
    "mlm_course/exercises/ch07_fine_tuning.py": ({"backward", "optimiser step", "schedule step"},
                                                 "exercise 07.1's worked solution, the step a learner writes"),
}


def code_only(text: str) -> str:
    """``text`` (Python source) without its strings and comments: a hint that says "call loss.backward()" is not
    a call."""
    import io
    import tokenize

    prose = {tokenize.STRING, tokenize.COMMENT} | {getattr(tokenize, name) for name in
                                                   ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
                                                   if hasattr(tokenize, name)}
    return "".join(tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type not in prose)


def training_calls(root: Path) -> dict[str, set[str]]:
    """{file under ``root``: the kinds of :data:`TRAINING_CALLS` its code makes}, for mlm_course/, benchmarks/ and
    scripts/."""
    found: dict[str, set[str]] = {}
    for folder in ("mlm_course", "benchmarks", "scripts"):
        for path in sorted((root / folder).rglob("*.py")):
            code = code_only(path.read_text())
            kinds = {kind for kind, pattern in TRAINING_CALLS.items() if re.search(pattern, code)}
            if kinds:
                found[path.relative_to(root).as_posix()] = kinds
    return found


def test_the_scan_sees_each_kind_of_call_and_skips_prose(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "own_step.py").write_text(
        "def step():\n    loss_fn().backward()  # the slip\n    optimizer.step()\n    self.scheduler.step()\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "scaled.py").write_text("scaler.step(self.optimizer)\n")
    (tmp_path / "mlm_course").mkdir()
    (tmp_path / "mlm_course" / "hint.py").write_text('HINT = "call loss.backward(), then optimizer.step()"\n')
    assert training_calls(tmp_path) == {"benchmarks/own_step.py": {"backward", "optimiser step", "schedule step"},
                                        "scripts/scaled.py": {"optimiser step"}}


def test_grep_finds_one_training_step():
    """backward() and the optimiser's and the schedule's steps are called in steps.py and in the files of
    :data:`ALLOWED` only, each for the reason given there."""
    assert training_calls(PACKAGE.parent) == {path: kinds for path, (kinds, _why) in ALLOWED.items()}
