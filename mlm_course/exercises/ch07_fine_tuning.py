"""Exercises of notebook 07_fine_tuning: the fine-tuning step written by the learner (checked against
:func:`mlm_course.steps.training_step`), accuracy and F1 from a confusion matrix, the classification head by hand,
length-bucketed batches, why MiniLM's lead is no evidence for masked-LM pretraining nor its zero-shot PLL for word
order, and the mixed-precision step (checked on the CPU by :mod:`mlm_course.exercises.amp_step_check`)."""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from transformers import BertConfig

from mlm_course.bert import BertClassifier
from mlm_course.exercises import Exercise, multiple_choice, numeric_grader, register
from mlm_course.exercises.amp_step_check import amp_slipped_step, grade_amp_step
from mlm_course.exercises.step_check import StepExercise, grade_step, slipped_step
from mlm_course.finetune import classification_loss, encode, pad_batch
from mlm_course.tokenization import course_tokenizer

# ---- 07.1: write the fine-tuning step ---------------------------------------------------------------------------
_REVIEWS_71 = (  # (sentence, label: 1 positive, 0 negative), of different lengths, so the batch is padded
    ("a gem.", 1),
    ("dull and far too long.", 0),
    ("the cast is wonderful and the story moved me to tears.", 1),
    ("i wanted to leave after ten minutes.", 0),
    ("funny, warm and clever.", 1),
    ("a mess of a film with nothing to say about anything at all.", 0),
    ("worth seeing twice.", 1),
    ("flat.", 0),
)


def _setup_71() -> tuple[BertClassifier, dict[str, torch.Tensor]]:
    """A one-layer BertClassifier on the course vocabulary, dropout 0.1, and one padded batch of eight reviews."""
    tok = course_tokenizer()
    data = encode(tok, [text for text, _ in _REVIEWS_71], [label for _, label in _REVIEWS_71])
    features = [{"input_ids": ids, "label": label, "index": i}
                for i, (ids, label) in enumerate(zip(data.input_ids, data.labels, strict=True))]
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                        initializer_range=0.2)  # wider than BERT's 0.02: the first gradient's norm is 3, so clipping acts
    return BertClassifier(config, seed=71), pad_batch(features, pad_token_id=tok.pad_token_id)


def _without_attention_mask(model, batch):
    return F.cross_entropy(model(batch["input_ids"]), batch["labels"])


def _on_the_cls_hidden_state(model, batch):
    hidden = model.last_hidden_state(batch["input_ids"], batch["attention_mask"])
    return F.cross_entropy(hidden[:, 0], batch["labels"])


def _on_probabilities(model, batch):
    return F.cross_entropy(model(batch["input_ids"], batch["attention_mask"]).softmax(-1), batch["labels"])


_STEP_71 = StepExercise(
    build=_setup_71,
    loss_fn=classification_loss,
    loss_name="finetune.classification_loss",
    loss_slips=(
        (_without_attention_mask,
         "the model was run without the attention mask, so every sentence attended to its padding: a batch padded "
         "to its longest sentence changes the shorter ones' logits. Pass batch['attention_mask'] to the model."),
        (_on_the_cls_hidden_state,
         "the loss was taken on the [CLS] hidden state (its hidden-size numbers read as scores of as many "
         "classes), not on the classifier's logits: the pooler and the classifier never learn. Use model(input_ids, "
         "attention_mask), which ends in the classification head."),
        (_on_probabilities,
         "the loss was taken on probabilities (softmax of the logits): F.cross_entropy applies log-softmax itself, "
         "so pass it the logits."),
    ),
    fall=0.3,
)


def _solution_71():
    import torch.nn.functional as F

    def my_finetune_step(model, batch, optimizer, scheduler):
        model.train()  # dropout on: the model may come from an evaluation, in eval mode
        logits = model(batch["input_ids"], batch["attention_mask"])  # (batch, classes); the mask hides padding
        loss = F.cross_entropy(logits, batch["labels"])  # mean −log p(true class) over the sentences
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return loss

    return my_finetune_step


register(Exercise(
    id="07.1",
    prompt=("Write my_finetune_step(model, batch, optimizer, scheduler) -> loss: one fine-tuning step of the course's "
            "BertClassifier (forward(input_ids, attention_mask) -> (batch, classes) logits) on a padded batch from "
            "finetune.pad_batch (input_ids, attention_mask, labels): cross-entropy of the logits against the labels, "
            "backward, clip the gradient norm to 1.0, the optimiser's step, the scheduler's step, zero the "
            "gradients; return the loss. Checked against steps.training_step with finetune.classification_loss on a "
            "copy of the same model (which comes in eval mode), with the same dropout masks: the same loss, the "
            "same clipped gradients and learning rate for 3 steps, and a loss that falls over 20."),
    grade=partial(grade_step, _STEP_71),
    solution=_solution_71,
    wrong_answers=(
        slipped_step(_without_attention_mask, "my_finetune_step_without_attention_mask"),
        slipped_step(classification_loss, "my_finetune_step_without_zero_grad", zero_grad=False),
        slipped_step(classification_loss, "my_finetune_step_without_clipping", clip="none"),
        slipped_step(_on_the_cls_hidden_state, "my_finetune_step_on_the_cls_hidden_state"),
        slipped_step(_on_probabilities, "my_finetune_step_on_probabilities"),
        slipped_step(classification_loss, "my_finetune_step_without_train_mode", train=False),
    ),
))

# ---- 07.2: accuracy and F1 from a confusion matrix -------------------------------------------------------------
_CONFUSION_72 = [[40, 10], [5, 45]]  # rows: true negative / positive; columns: predicted negative / positive
_ACC_72, _F1_72 = 85 / 100, 2 * 45 / (2 * 45 + 10 + 5)
_GRADE_F1_72, _WRONG_F1_72 = numeric_grader(
    "07.2", _F1_72,
    wrong={
        2 * 40 / (2 * 40 + 5 + 10):
            "that is the F1 of the negative class; F1 here is for the positive class (row 1, column 1 = 45).",
        (45 / 55, 45 / 50):
            "that is precision (45/55) or recall (45/50) alone; F1 is their harmonic mean, 2·TP / (2·TP + FP + FN).",
        (45 / 55 + 45 / 50) / 2:
            "the arithmetic mean of precision and recall is not F1: use the harmonic mean, 2PR / (P + R).",
    },
    fallback="F1 of the positive class = 2·TP / (2·TP + FP + FN) with TP = 45, FP = 10, FN = 5.",
    rel_tol=1e-9, abs_tol=1e-3,  # math.isclose's default rel_tol
)


def _grade_72(answer) -> str | None:
    accuracy, f1 = (float(x) for x in answer)
    if not math.isclose(accuracy, _ACC_72, abs_tol=1e-3):
        return "accuracy is the diagonal over everything: (40 + 45) / 100."
    return _GRADE_F1_72(f1)


register(Exercise(
    id="07.2",
    prompt=(f"Confusion matrix {_CONFUSION_72} (rows = true negative/positive, columns = predicted). Give "
            "(accuracy, F1 of the positive class)."),
    grade=_grade_72,
    solution=lambda: (_ACC_72, _F1_72),
    wrong_answers=(*((_ACC_72, f1) for f1 in _WRONG_F1_72), (0.45, _F1_72)),
))

# ---- 07.3: the head by hand ---------------------------------------------------------------------------------------


def _tiny_classifier():
    """A tiny course ``BertClassifier``, the class section 3 shows (``model.pooler``, ``model.classifier``)."""
    from transformers import BertConfig

    from mlm_course.bert import BertClassifier

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    return BertClassifier(config, num_labels=2, seed=6).eval()


def _grade_73(fn) -> str | None:
    model = _tiny_classifier()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (3, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[:, 0] = 2
    with torch.no_grad():
        hidden = model.last_hidden_state(ids, mask)
        expected = model(ids, mask)
        got = torch.as_tensor(fn(hidden, model))
    if got.shape != expected.shape:
        return f"return logits of shape (batch, num_labels) = {tuple(expected.shape)}, got {tuple(got.shape)}."
    if torch.allclose(got, expected, atol=1e-5):
        return None
    return next((hint for wrong, hint in _WRONG_73 if torch.allclose(got, wrong(hidden, model), atol=1e-5)),
                "logits = classifier(tanh(pooler.dense(hidden_states[:, 0]))) (dropout is off in eval mode).")


def _solution_73():
    def head(hidden_states, model):
        pooled = torch.tanh(model.pooler.dense(hidden_states[:, 0]))
        return model.classifier(pooled)

    return head


_WRONG_73 = (  # (a common wrong head, its hint)
    (lambda h, m: m.classifier(h[:, 0]),
     "BERT's head first passes h_[CLS] through the pooler: tanh(pooler.dense(h)). You skipped it."),
    (lambda h, m: m.classifier(torch.tanh(m.pooler.dense(h.mean(1)))),
     "the pooler reads the [CLS] position only (hidden_states[:, 0]), not the mean over tokens."),
    (lambda h, m: m.classifier(m.pooler.dense(h[:, 0])), "the pooler ends with tanh: tanh(pooler.dense(h_[CLS]))."),
)

register(Exercise(
    id="07.3",
    prompt=("Write head(hidden_states, model) -> logits: the head of the course's BertClassifier (model.pooler, "
            "model.classifier; section 3) from the encoder's last hidden states (batch, seq, hidden), in eval mode."),
    grade=_grade_73,
    solution=_solution_73,
    wrong_answers=tuple(wrong for wrong, _ in _WRONG_73),
))

# ---- 07.4: length buckets -----------------------------------------------------------------------------------------
_LENGTHS_74 = torch.randint(3, 80, (1000,), generator=torch.Generator().manual_seed(64))


def _padding(batches, lengths) -> int:
    return sum(len(b) * int(lengths[b].max()) - int(lengths[b].sum()) for b in batches)


def _grade_74(fn) -> str | None:
    lengths, batch_size = _LENGTHS_74.clone(), 16
    runs = []
    for seed in (0, 1, 0):
        batches = [[int(i) for i in b] for b in fn(lengths.clone(), batch_size, torch.Generator().manual_seed(seed))]
        runs.append(batches)
    batches = runs[0]
    flat = sorted(i for b in batches for i in b)
    if flat != list(range(len(lengths))):
        missing = len(lengths) - len(set(flat))
        return (f"every example must appear exactly once per epoch ({missing} missing or some twice): keep the last, "
                "smaller batch instead of dropping it.")
    if any(len(b) > batch_size or not b for b in batches):
        return f"each batch holds between 1 and {batch_size} examples."
    random_batches = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(0)).split(batch_size)
    if _padding(batches, lengths) > 0.25 * _padding([b.tolist() for b in random_batches], lengths):
        return "batches mix short and long sentences: sort by length (within pools of many batches) before cutting."
    if runs[0] == runs[1]:
        return ("a different generator seed gives the very same batches: shuffle (the pools and the batch order) "
                "with the generator, or every epoch sees the same batches in the same order.")
    if runs[0] != runs[2]:
        return "the same seed must give the same batches: draw every random number from the generator you are given."
    return None


def _solution_74():
    def bucket_batches(lengths, batch_size, generator):
        order = torch.randperm(len(lengths), generator=generator)
        pool = 50 * batch_size
        batches = []
        for begin in range(0, len(order), pool):
            chunk = order[begin:begin + pool]
            chunk = chunk[lengths[chunk].argsort(descending=True)]
            batches += list(chunk.split(batch_size))
        return [batches[i] for i in torch.randperm(len(batches), generator=generator)]

    return bucket_batches


def _sorted_only(lengths, batch_size, generator):
    return list(lengths.argsort().split(batch_size))


def _random_batches(lengths, batch_size, generator):
    return list(torch.randperm(len(lengths), generator=generator).split(batch_size))


def _drop_last(lengths, batch_size, generator):
    order = lengths.argsort()
    batches = [b for b in order.split(batch_size) if len(b) == batch_size]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]


register(Exercise(
    id="07.4",
    prompt=("Write bucket_batches(lengths, batch_size, generator) -> list of index lists: every example once, "
            "batches of similar lengths (little padding), a different order for a different seed, no Python loop "
            "over examples."),
    grade=_grade_74,
    solution=_solution_74,
    wrong_answers=(_sorted_only, _random_batches, _drop_last),
))

# ---- 07.5: explain why MiniLM's lead does not measure masked-LM pretraining -----------------------------------------
multiple_choice(
    "07.5",
    "Fine-tuned with the same recipe, MiniLM-L6 reaches 83.7 % test accuracy and the course checkpoint 76.3 %. "
    "Why is this gap no evidence that masked-LM pretraining is what pays?",
    {
        "a": "Because MiniLM differs in much more than the objective: it was distilled from a larger model, then "
             "trained contrastively on about 1 B sentence pairs, with 15× the parameters.",
        "b": "Because the gap is within the noise of a test set of 1,057 sentences: a 95 % interval at that size is "
             "wider than the 7.4 points between the two models.",
        "c": "Because MiniLM was fine-tuned for more epochs than the course checkpoint, and the extra passes over "
             "the labelled sentences, not anything it learned before, bought its lead.",
        "d": "Because the test set was used to pick each model's best checkpoint, so 83.7 % is MiniLM's luckiest "
             "test score, not a fair estimate of its accuracy.",
    },
    "a",
    {
        "b": "one 95 % interval at 80 % accuracy on 1,057 sentences is about ±2.4 points (the dot plot's bars); 7.4 "
             "points is far outside it. The gap is real; the question is what caused it.",
        "c": "it had fewer: one epoch against two (section 6 prints them), which can only have hurt MiniLM. Look at "
             "how MiniLM itself was trained (section 3).",
        "d": "every model is chosen on dev and test is scored once (section 5), the same rule for all rows.",
    },
)

# ---- 07.6: explain why MiniLM is at chance on zero-shot word order ----------------------------------------------------
multiple_choice(
    "07.6",
    "Zero-shot, the course checkpoint gives the real sentence the higher pseudo-log-likelihood in 96.0 % of the word-"
    "order test pairs; MiniLM-L6, a far stronger encoder, in 50.0 % (95 % interval 44.4-55.6 %). Why is MiniLM at "
    "chance?",
    {
        "a": "Because MiniLM never read Austen or Wikipedia, so this 19th-century and encyclopaedic English is "
             "foreign to it, and its word probabilities for it are poor.",
        "b": "Because MiniLM ships without a masked-LM head, so loading it as a masked LM initialises the head at "
             "random: every PLL is noise, however good the encoder is.",
        "c": "Because PLL is biased towards short sentences, and MiniLM's tokenizer cuts the corrupted copies into "
             "fewer pieces than the real ones, so they win about half the pairs.",
        "d": "Because a 6-layer model is too shallow to represent word order: its attention cannot tell a sentence "
             "from a shuffled copy of the same words.",
    },
    "b",
    {
        "a": "MiniLM's training text (its teacher's pretraining corpus, then about 1 B sentence pairs) is far larger "
             "than ours and covers this English; and the fine-tuned rows show its encoder is strong. Ask what turns "
             "its hidden states into the word probabilities that PLL adds up.",
        "c": "a swap or a shuffle moves words without changing them, so both versions of a sentence have exactly the "
             "same tokens and the same length: PLL compares like with like here.",
        "d": "the course checkpoint has 2 layers and reaches 96.0 %. Depth is not the problem; look at the loading "
             "report: which weights were missing?",
    },
)

# ---- 07.7: write the mixed-precision step -----------------------------------------------------------------------


def _solution_77():
    import torch.nn.functional as F

    def my_amp_step(model, batch, optimizer, scheduler, scaler, device, dtype):
        batch = {name: tensor.to(device) for name, tensor in batch.items()}  # where the model's weights are
        with torch.autocast(device_type=device.type, dtype=dtype):  # matrix products in float16 (or bfloat16)
            logits = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits.float(), batch["labels"])  # the loss in float32
        scaler.scale(loss).backward()  # loss × scale: small gradients no longer underflow float16
        scaler.unscale_(optimizer)  # divide the gradients by the scale, note any inf or nan ...
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # ... so clipping sees the true norm
        scaler.step(optimizer)  # optimizer.step(), skipped if the gradients overflowed
        scaler.update()  # halve the scale after an overflow, grow it after a run of good steps
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return my_amp_step


register(Exercise(
    id="07.7",
    prompt=("Write my_amp_step(model, batch, optimizer, scheduler, scaler, device, dtype) -> loss: one mixed-precision "
            "step of the course's BertClassifier, as on a GPU. Move every tensor of the batch (on the CPU) to device "
            "with .to(device); run the model on (input_ids, attention_mask) under torch.autocast(device_type="
            "device.type, dtype=dtype); take the loss in float32, F.cross_entropy(logits.float(), labels) (as "
            "finetune.classification_loss); scaler.scale(loss).backward(); scaler.unscale_(optimizer); clip the "
            "gradient norm to 1.0; scaler.step(optimizer); scaler.update(); scheduler.step(); "
            "optimizer.zero_grad(set_to_none=True); return the loss. Checked on the CPU against a reference step on "
            "copies of 07.1's model and batch: four float16 steps with GradScaler('cpu', init_scale=2**10, "
            "growth_interval=1), the third with the scale set to 2**40 so that its gradients overflow (its update "
            "must be skipped), then one bfloat16 step with a disabled scaler; the same logits dtype, loss, applied "
            "gradients, learning rate and scale at every step."),
    grade=partial(grade_amp_step, _setup_71),
    solution=_solution_77,
    wrong_answers=(
        amp_slipped_step("my_amp_step_clipping_before_unscaling", clip="before unscale"),
        amp_slipped_step("my_amp_step_with_optimizer_step", scaler_step=False),
        amp_slipped_step("my_amp_step_without_update", update=False),
        amp_slipped_step("my_amp_step_on_the_unscaled_loss", scale=False),
        amp_slipped_step("my_amp_step_without_autocast", autocast=False),
        amp_slipped_step("my_amp_step_with_a_float16_loss", fp32_loss=False),
        amp_slipped_step("my_amp_step_without_zero_grad", zero_grad=False),
        amp_slipped_step("my_amp_step_without_moving_the_batch", move=False),
    ),
))
