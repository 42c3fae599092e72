"""Exercise 07.7, the mixed-precision step checked on the CPU: right steps pass, each slip gets a hint naming it.

Every slip is written out as its own step function here (not with the exercise's ``amp_slipped_step``), so that a
check that stopped catching one fails its test.
"""

import pytest
import torch
import torch.nn.functional as F

from mlm_course import exercises
from mlm_course.finetune import classification_loss

clip_grad_norm_ = torch.nn.utils.clip_grad_norm_


def _loss(model, batch, device, dtype):
    """The right first half of the step: batch moved, forward under autocast, the loss in float32."""
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.autocast(device_type=device.type, dtype=dtype):
        logits = model(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(logits.float(), batch["labels"])


def _update(model, optimizer, scheduler, scaler):
    """The right second half, after backward: unscale, clip, step, update, schedule, zero."""
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


# ---- right steps written other ways ----------------------------------------------------------------------------

def with_classification_loss_under_autocast(model, batch, optimizer, scheduler, scaler, device, dtype):
    batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    with torch.autocast(device_type=device.type, dtype=dtype):
        loss = classification_loss(model, batch)
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.item()


def cross_entropy_under_autocast(model, batch, optimizer, scheduler, scaler, device, dtype):
    model.train()
    batch = {k: v.to(device=device) for k, v in batch.items()}
    with torch.autocast(device_type=device.type, dtype=dtype):
        loss = F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]), batch["labels"])  # float32 there
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss


def zeroing_first(model, batch, optimizer, scheduler, scaler, device, dtype):
    model.zero_grad(set_to_none=False)
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    return loss.detach()


@pytest.mark.parametrize("step", [exercises.solution("07.7"), with_classification_loss_under_autocast,
                                  cross_entropy_under_autocast, zeroing_first], ids=lambda fn: fn.__name__)
def test_a_right_step_passes(step):
    assert exercises.grade("07.7", step) is None


# ---- the slips -------------------------------------------------------------------------------------------------

def clipping_before_unscaling(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    clip_grad_norm_(model.parameters(), 1.0)  # the gradients are still × scale
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def clipping_without_unscaling(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    clip_grad_norm_(model.parameters(), 1.0)  # scaler.step unscales, but only after this
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def optimizer_step_instead_of_scaler_step(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()  # also on a step whose gradients overflowed
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def without_update(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def backward_on_the_unscaled_loss(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    loss.backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def scaled_but_backward_on_the_loss(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss)  # scaled, then thrown away
    loss.backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def backward_under_autocast(model, batch, optimizer, scheduler, scaler, device, dtype):
    with torch.autocast(device_type=device.type, dtype=dtype):
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]), batch["labels"])
        scaler.scale(loss).backward()
        _update(model, optimizer, scheduler, scaler)
    return loss


def without_autocast(model, batch, optimizer, scheduler, scaler, device, dtype):
    batch = {k: v.to(device) for k, v in batch.items()}
    loss = F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]).float(), batch["labels"])
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def autocast_on_cuda(model, batch, optimizer, scheduler, scaler, device, dtype):
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.autocast(device_type="cuda", dtype=dtype, enabled=torch.cuda.is_available()):
        logits = model(batch["input_ids"], batch["attention_mask"])  # not on the CPU this runs on
    loss = F.cross_entropy(logits.float(), batch["labels"])
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def always_float16(model, batch, optimizer, scheduler, scaler, device, dtype):
    return exercises.solution("07.7")(model, batch, optimizer, scheduler, scaler, device, torch.float16)


def float16_loss(model, batch, optimizer, scheduler, scaler, device, dtype):
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.autocast(device_type=device.type, dtype=dtype):
        logits = model(batch["input_ids"], batch["attention_mask"])
    loss = F.cross_entropy(logits, batch["labels"])  # float16 logits, outside autocast: a float16 loss
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def without_zero_grad(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    return loss.detach()


def zeroing_only_after_an_update(model, batch, optimizer, scheduler, scaler, device, dtype):
    """Leaves an overflow's inf in .grad: every later step overflows too (the check sees it at step 4)."""
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    if scaler.get_scale() >= before:
        optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def batch_not_moved(model, batch, optimizer, scheduler, scaler, device, dtype):
    with torch.autocast(device_type=device.type, dtype=dtype):
        logits = model(batch["input_ids"], batch["attention_mask"])
    loss = F.cross_entropy(logits.float(), batch["labels"])
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def labels_not_moved(model, batch, optimizer, scheduler, scaler, device, dtype):
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
    with torch.autocast(device_type=device.type, dtype=dtype):
        logits = model(ids, mask)
    loss = F.cross_entropy(logits.float(), batch["labels"])
    scaler.scale(loss).backward()
    _update(model, optimizer, scheduler, scaler)
    return loss.detach()


def stepping_twice(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    optimizer.step()
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def without_clipping(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def clipping_after_the_step(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def optimizer_step_without_unscaling(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scaler.update()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def without_scheduler_step(model, batch, optimizer, scheduler, scaler, device, dtype):
    loss = _loss(model, batch, device, dtype)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def returning_the_scaled_loss(model, batch, optimizer, scheduler, scaler, device, dtype):
    scaled = scaler.scale(_loss(model, batch, device, dtype))
    scaled.backward()
    _update(model, optimizer, scheduler, scaler)
    return scaled.detach()


def returning_nothing(model, batch, optimizer, scheduler, scaler, device, dtype):
    scaler.scale(_loss(model, batch, device, dtype)).backward()
    _update(model, optimizer, scheduler, scaler)


SLIPS = {  # a faulty step → words its hint must contain
    clipping_before_unscaling: "clipped while still multiplied by the scale",
    clipping_without_unscaling: "clipped while still multiplied by the scale",
    optimizer_step_instead_of_scaler_step: "call scaler.step(optimizer) instead of optimizer.step()",
    without_update: "the scale stayed at 1024 after step 1",
    backward_on_the_unscaled_loss: "did not go through scaler.scale(loss)",
    scaled_but_backward_on_the_loss: "did not go through scaler.scale(loss)",
    backward_under_autocast: "the backward pass ran under autocast",
    without_autocast: "the model ran in float32",
    autocast_on_cuda: "torch.autocast(device_type=device.type",
    always_float16: "given dtype=torch.bfloat16",
    float16_loss: "the loss you scaled was float16",
    without_zero_grad: "the gradients were not zeroed",
    zeroing_only_after_an_update: "the gradients were not zeroed",
    batch_not_moved: "never moved with .to(device)",
    labels_not_moved: "never moved with .to(device)",
    stepping_twice: "stepped 2 times in one step",
    without_clipping: "applied gradients of norm 2.36: clip them",
    clipping_after_the_step: "unscale_(optimizer) came after scaler.step(optimizer)",
    optimizer_step_without_unscaling: "found no record of an inf check",
    without_scheduler_step: "call scheduler.step() once per step",
    returning_the_scaled_loss: "you returned the scaled loss",
    returning_nothing: "return the step's loss",
}


@pytest.mark.parametrize(("step", "words"), SLIPS.items(), ids=[fn.__name__ for fn in SLIPS])
def test_each_slip_is_named(step, words):
    hint = exercises.grade("07.7", step)
    assert hint is not None and words in hint, hint


def test_the_main_slips_get_different_hints():
    main = (clipping_before_unscaling, optimizer_step_instead_of_scaler_step, without_update,
            backward_on_the_unscaled_loss, without_autocast, float16_loss, without_zero_grad, batch_not_moved)
    assert len({exercises.grade("07.7", step) for step in main}) == len(main)


def test_grading_keeps_the_learners_torch_state():
    threads = torch.get_num_threads()
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    assert exercises.grade("07.7", exercises.solution("07.7")) is None
    assert torch.equal(torch.rand(3), expected) and torch.get_num_threads() == threads


def test_an_older_torch_is_told_what_the_check_needs(monkeypatch):
    from torch.torch_version import TorchVersion

    monkeypatch.setattr(torch, "__version__", TorchVersion("2.3.1"))
    assert "need torch 2.4 or newer; this is torch 2.3.1" in exercises.grade("07.7", exercises.solution("07.7"))


def test_the_check_overflows_step_3_and_only_it():
    """Step 3's scale of 2**40 must overflow float16 (else optimizer.step() in place of scaler.step would pass), and
    steps 1, 2 and 4 must not; the first applied gradient must exceed the clip (else clipping would go unnoticed)."""
    from mlm_course.exercises import amp_step_check as check
    from mlm_course.exercises.ch07_fine_tuning import _setup_71

    model, batch = _setup_71()
    trainer = check.Trainer(check.reference_step, model, torch.float16)
    records = [trainer.run(batch, scale) for scale in check.RUNS[0][1]]
    assert [len(r.applied) for r in records] == [1, 1, 0, 1]
    assert [r.scale_after for r in records] == [2.0**11, 2.0**12, 2.0**39, 2.0**11]
    model, batch = _setup_71()
    F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]), batch["labels"]).backward()
    assert float(clip_grad_norm_(model.parameters(), 1.0)) > 2.0
