"""Exercises of notebook 04_inside_bert: the learner writes attention with a padding mask, the masking function and
one MLM training step, each checked against torch, the package and transformers; counts a layer's parameters; and
explains why the pooler of these checkpoints is untrained."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM

from mlm_course.exercises import Exercise, Near, multiple_choice, numeric, register

# ---- 04.1: scaled dot-product attention with a padding mask --------------------------------------------------------


def _cases_41():
    g = torch.Generator().manual_seed(41)
    q, k, v = (torch.randn(3, 2, 6, 8, generator=g) * 2 for _ in range(3))
    key_mask = torch.arange(6)[None, :] < torch.tensor([6, 4, 1])[:, None]  # True at real tokens
    return q, k, v, key_mask


def _variants_41(q, k, v, key_mask):
    """What common mistakes compute, by name (for the hints)."""
    scores = q @ k.transpose(-2, -1)
    keys = key_mask[:, None, None, :]
    low = torch.finfo(q.dtype).min
    softmax = (scores / math.sqrt(q.shape[-1])).softmax(-1)
    return {
        "unscaled": scores.masked_fill(~keys, low).softmax(-1) @ v,
        "by d": (scores / q.shape[-1]).masked_fill(~keys, low).softmax(-1) @ v,
        "after softmax": softmax.masked_fill(~keys, 0.0) @ v,
        "no mask": softmax @ v,
        "query mask": (scores / math.sqrt(q.shape[-1])).masked_fill(~key_mask[:, None, :, None], low).softmax(-1) @ v,
        "wrong dim": (scores / math.sqrt(q.shape[-1])).masked_fill(~keys, low).softmax(-2) @ v,
    }


_HINTS_41 = {
    "unscaled": "divide the scores by √d (d = head size, q.shape[-1]) before the softmax.",
    "by d": "scale by √d, not by d: q·k has variance d, √d brings it back to 1.",
    "after softmax": ("the mask was applied after the softmax: the remaining weights no longer sum to 1. Set padding "
                      "scores to −∞ (or the dtype's lowest value) *before* the softmax."),
    "no mask": "padding keys are still attended to: fill their scores with −∞ where key_mask is False.",
    "query mask": ("the mask must hide padding *keys* (the last dimension, key_mask[:, None, None, :]), not "
                   "padding queries."),
    "wrong dim": "softmax over the keys (dim=-1): each query's weights must sum to 1.",
}


def _grade_41(fn) -> str | None:
    q, k, v, key_mask = _cases_41()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :])
    got = torch.as_tensor(fn(q.clone(), k.clone(), v.clone(), key_mask.clone()))
    if got.shape != expected.shape:
        return f"return the attention output shaped like v {tuple(expected.shape)}, got {tuple(got.shape)}."
    if torch.allclose(got, expected, atol=1e-5):
        return None
    for name, wrong in _variants_41(q, k, v, key_mask).items():
        if torch.allclose(got, wrong, atol=1e-5):
            return _HINTS_41[name]
    return "weights = softmax(q·kᵀ/√d with padding keys at −∞, over the keys); output = weights · v."


def _solution_41():
    def attention(q, k, v, key_mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        return scores.softmax(dim=-1) @ v

    return attention


def _wrong_41(name):
    def attention(q, k, v, key_mask):
        return _variants_41(q, k, v, key_mask)[name]

    attention.__name__ = f"attention_{name.replace(' ', '_')}"
    return attention


register(Exercise(
    id="04.1",
    prompt=("Write attention(q, k, v, key_mask) -> output: scaled dot-product attention over (batch, heads, length, "
            "d) tensors; key_mask (batch, length) is True at real tokens and False at padding, which no query may "
            "attend to. Checked against torch.nn.functional.scaled_dot_product_attention."),
    grade=_grade_41,
    solution=_solution_41,
    wrong_answers=tuple(_wrong_41(name) for name in _HINTS_41),
))

# ---- 04.2: the masking function ------------------------------------------------------------------------------------
# a toy vocabulary: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, words 5 … 59
_SPECIALS_42 = (0, 1, 2, 3, 4)
_MASK_42, _VOCAB_42 = 4, 60


def _batch_42(rows: int = 3000, length: int = 32):
    g = torch.Generator().manual_seed(42)
    ids = torch.randint(5, _VOCAB_42, (rows, length), generator=g)
    lengths = torch.randint(4, length + 1, (rows,), generator=g)
    positions = torch.arange(length)[None, :]
    ids[:, 0] = 2
    ids[positions == (lengths[:, None] - 1)] = 3
    ids[positions >= lengths[:, None]] = 0
    ids[torch.rand(ids.shape, generator=g) < 0.02] = 1  # a few [UNK]: special too, never selected
    special = torch.isin(ids, torch.tensor(_SPECIALS_42))
    return ids, special


def _share_ok(count: int, trials: int, p: float) -> bool:
    return abs(count / trials - p) <= 4.5 * math.sqrt(p * (1 - p) / trials) + 1e-9  # 4.5 σ: p ≈ 7e-6 per check


def _grade_42(fn) -> str | None:
    from mlm_course.masking import IGNORE_INDEX, replacement_ids

    ids, special = _batch_42()
    before = ids.clone()
    corrupted, labels = (torch.as_tensor(t) for t in fn(ids, special.clone(), _SPECIALS_42, _MASK_42, _VOCAB_42,
                                                       torch.Generator().manual_seed(0)))
    if not torch.equal(ids, before):
        return "input_ids was changed in place: work on a clone (the caller still needs the original ids)."
    if corrupted.shape != ids.shape or labels.shape != ids.shape:
        return f"return (corrupted_ids, labels), both shaped like input_ids {tuple(ids.shape)}."
    if not (labels == IGNORE_INDEX).any():
        return "positions that were not selected need the label -100 (ignored by the loss), not an id or 0."
    selected = labels != IGNORE_INDEX
    if (selected & special).any():
        return ("a special token ([CLS], [SEP], [PAD], [UNK] …) was selected: only positions where special_mask is "
                "False may be drawn.")
    if (labels[selected] == _MASK_42).any() and torch.equal(labels[selected], corrupted[selected]):
        return ("the labels were taken from the corrupted ids (they hold [MASK] = 4): labels are the *original* ids "
                "at the selected positions — clone input_ids before corrupting them.")
    if not torch.equal(labels[selected], ids[selected]):
        return "at each selected position the label is the original id; everywhere else -100."
    if not torch.equal(corrupted[~selected], ids[~selected]):
        return "only selected positions may change; every other id stays as it was."
    maskable = int((~special).sum())
    if not _share_ok(int(selected.sum()), maskable, 0.15):
        return (f"{selected.sum() / maskable:.3f} of the maskable tokens were selected, not 0.15: one Bernoulli(0.15) "
                "draw per non-special token.")
    new = corrupted[selected]
    allowed = replacement_ids(_VOCAB_42, _SPECIALS_42)
    if torch.isin(new, torch.tensor([0, 1, 2, 3])).any():
        return ("a random replacement was a special id ([PAD], [CLS], …): draw random tokens only from the non-special "
                "ids, e.g. torch.randint(5, vocab_size) here, or index a tensor of allowed ids.")
    n = len(new)
    n_mask, n_kept = int((new == _MASK_42).sum()), int((new == ids[selected]).sum())
    n_random = n - n_mask - n_kept
    p_collide = 1 / len(allowed)  # a random draw that happens to equal the original counts as unchanged
    if not (_share_ok(n_mask, n, 0.8) and _share_ok(n_random, n, 0.1 * (1 - p_collide))
            and _share_ok(n_kept, n, 0.1 + 0.1 * p_collide)):
        shares = f"{n_mask / n:.1%} [MASK] / {n_random / n:.1%} random / {n_kept / n:.1%} unchanged"
        if _share_ok(n_random, n, 0.02):
            return (f"{shares}: the random coin was thrown with p = 0.1 among the 20 % left after [MASK]; it needs "
                    "p = 0.5 there (or one uniform draw u: u < 0.8 → [MASK], u < 0.9 → random).")
        return f"{shares}: aim for 80 % [MASK], 10 % random, 10 % unchanged among the selected positions."
    again = fn(ids, special.clone(), _SPECIALS_42, _MASK_42, _VOCAB_42, torch.Generator().manual_seed(0))
    if not all(torch.equal(torch.as_tensor(a), b) for a, b in zip(again, (corrupted, labels), strict=True)):
        return "pass the generator to every random draw (torch.rand(..., generator=generator)): same seed, same masks."
    return None


def _solution_42():
    def mask_tokens(input_ids, special_mask, special_ids, mask_id, vocab_size, generator):
        selected = (torch.rand(input_ids.shape, generator=generator) < 0.15) & ~special_mask
        labels = torch.where(selected, input_ids, -100)
        u = torch.rand(input_ids.shape, generator=generator)
        allowed = torch.tensor([i for i in range(vocab_size) if i not in special_ids])
        random_ids = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
        corrupted = torch.where(selected & (u < 0.8), mask_id, input_ids)
        corrupted = torch.where(selected & (u >= 0.8) & (u < 0.9), random_ids, corrupted)
        return corrupted, labels

    return mask_tokens


def _masking_variant(*, skip_specials=True, random_low=5, labels_from=None, p_random=0.5, ignore=-100,
                     seeded=True, in_place=False):
    def mask_tokens(input_ids, special_mask, special_ids, mask_id, vocab_size, generator):
        g = generator if seeded else None
        selected = torch.rand(input_ids.shape, generator=g) < 0.15
        selected &= ~special_mask if skip_specials else torch.ones_like(selected)
        corrupted = input_ids if in_place else input_ids.clone()
        u, u2 = torch.rand(input_ids.shape, generator=g), torch.rand(input_ids.shape, generator=g)
        to_random = selected & (u >= 0.8) & (u2 < p_random)
        corrupted[selected & (u < 0.8)] = mask_id
        corrupted[to_random] = torch.randint(random_low, vocab_size, (int(to_random.sum()),), generator=g)
        labels = torch.where(selected, corrupted if labels_from == "corrupted" else input_ids, ignore)
        return corrupted, labels

    return mask_tokens


register(Exercise(
    id="04.2",
    prompt=("Write mask_tokens(input_ids, special_mask, special_ids, mask_id, vocab_size, generator) -> "
            "(corrupted_ids, labels): select each token whose special_mask is False with probability 0.15 (Bernoulli); "
            "of the selected, 80 % become mask_id, 10 % a random non-special id, 10 % stay; labels are the original "
            "id at selected positions and -100 elsewhere. Do not modify input_ids; draw with the generator."),
    grade=_grade_42,
    solution=_solution_42,
    wrong_answers=(
        _masking_variant(skip_specials=False),
        _masking_variant(random_low=0),
        _masking_variant(labels_from="corrupted"),
        _masking_variant(ignore=0),
        _masking_variant(p_random=0.1),
        _masking_variant(in_place=True),
        _masking_variant(seeded=False),
    ),
))

# ---- 04.3: one MLM training step on our BertMLM --------------------------------------------------------------------


def _setup_43():
    """(transformers model, our copy of it, two padded batches with labels)."""
    from mlm_course.bert import BertMLM

    config = BertConfig(vocab_size=53, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(43)
        reference = BertForMaskedLM(config)
    g = torch.Generator().manual_seed(43)
    batches = []
    for _ in range(2):
        ids = torch.randint(5, 53, (4, 12), generator=g)
        mask = (torch.arange(12)[None, :] < torch.tensor([12, 9, 6, 4])[:, None]).long()
        ids[mask == 0] = 0
        labels = torch.where((torch.rand(ids.shape, generator=g) < 0.3) & (mask == 1), ids, -100)
        labels[:, 1] = ids[:, 1]  # every row predicts at least one token
        batches.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return reference, BertMLM.from_transformers(reference).train(), batches


def _reference_step(model, optimizer, batch) -> float:
    from mlm_course.objective import mlm_loss

    optimizer.zero_grad()
    loss = mlm_loss(model(batch["input_ids"], batch["attention_mask"]), batch["labels"])
    loss.backward()
    optimizer.step()
    return loss.item()


def _run_steps(step, model) -> tuple[list[float], dict[str, torch.Tensor]]:
    _, _, batches = _setup_43()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = [float(step(model, optimizer, {k: v.clone() for k, v in batch.items()})) for batch in batches]
    return losses, {name: p.detach().clone() for name, p in model.named_parameters()}


def _grade_43(fn) -> str | None:
    reference, ours, batches = _setup_43()
    start = {name: p.detach().clone() for name, p in ours.named_parameters()}
    with torch.no_grad():
        hf_loss = float(reference(**batches[0]).loss)  # transformers' BertForMaskedLM on the same weights
    expected_losses, expected = _run_steps(_reference_step, copy.deepcopy(ours))
    losses, got = _run_steps(fn, copy.deepcopy(ours))
    if all(torch.equal(got[n], start[n]) for n in start):
        return ("the weights did not move: call loss.backward() and then optimizer.step() (zero_grad before backward, "
                "not between backward and step).")
    if not math.isclose(losses[0], hf_loss, abs_tol=1e-5):
        with torch.no_grad():
            logits = ours(batches[0]["input_ids"], batches[0]["attention_mask"]).flatten(0, 1)
            unmasked = float(F.cross_entropy(ours(batches[0]["input_ids"]).flatten(0, 1),
                                             batches[0]["labels"].flatten()))
            everywhere = float(F.cross_entropy(logits, batches[0]["input_ids"].flatten()))
        if math.isclose(losses[0], unmasked, abs_tol=1e-5):
            return "pass batch['attention_mask'] to the model: without it every token attends to the padding."
        if math.isclose(losses[0], everywhere, abs_tol=1e-5):
            return ("the loss was computed at every position against input_ids: use batch['labels'] (-100 = not "
                    "predicted), so only the selected positions count.")
        return (f"the first loss is {losses[0]:.5f} but transformers' BertForMaskedLM gives {hf_loss:.5f} on the same "
                "weights: F.cross_entropy(logits.flatten(0, 1), labels.flatten()) — it ignores -100 by default.")
    if all(torch.allclose(got[n], expected[n], atol=1e-6) for n in expected) and math.isclose(
            losses[1], expected_losses[1], abs_tol=1e-5):
        return None
    _, accumulated = _run_steps(_step_variant(zero_grad=False), copy.deepcopy(ours))
    if all(torch.allclose(got[n], accumulated[n], atol=1e-6) for n in expected):
        return ("the first step is right, the second is not: gradients add up across backward() calls, so call "
                "optimizer.zero_grad() in every step.")
    return "the loss is right but the weights after two steps are not: zero_grad → forward → loss → backward → step."


def _solution_43():
    def train_step(model, optimizer, batch):
        optimizer.zero_grad()
        logits = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())  # -100 is ignored
        loss.backward()
        optimizer.step()
        return loss.item()

    return train_step


def _step_variant(*, zero_grad=True, use_mask=True, target="labels", step=True):
    def train_step(model, optimizer, batch):
        if zero_grad:
            optimizer.zero_grad()
        logits = model(batch["input_ids"], batch["attention_mask"] if use_mask else None)
        loss = F.cross_entropy(logits.flatten(0, 1), batch[target].flatten())
        loss.backward()
        if step:
            optimizer.step()
        return loss.item()

    return train_step


register(Exercise(
    id="04.3",
    prompt=("Write train_step(model, optimizer, batch) -> float: one MLM training step of our BertMLM (forward "
            "returns logits) on a batch dict with input_ids, attention_mask and labels (-100 = not predicted); "
            "return the loss. Checked against transformers' BertForMaskedLM loss on the same weights."),
    grade=_grade_43,
    solution=_solution_43,
    wrong_answers=(_step_variant(zero_grad=False), _step_variant(use_mask=False), _step_variant(target="input_ids"),
                   _step_variant(step=False)),
))

# ---- 04.4: parameters of one encoder layer of BERT-large (the notebook prints BERT-base's counts only) ------------
_H, _I = 1024, 4096
_LAYER_44 = 4 * _H * _H + 4 * _H + 2 * _H * _I + _I + _H + 4 * _H  # 12,596,224
_BASE_LAYER = 4 * 768 * 768 + 4 * 768 + 2 * 768 * 3072 + 3072 + 768 + 4 * 768  # 7,087,872: BERT-base's layer

numeric(
    "04.4",
    "How many parameters does one encoder layer of BERT-large have (H = 1024, I = 4096, 16 heads; biases and "
    "LayerNorms included)? Give an integer.",
    _LAYER_44,
    wrong={
        _BASE_LAYER: "that is one layer of BERT-base (H = 768, I = 3072); BERT-large has H = 1024, I = 4096.",
        4 * _H * _H + 2 * _H * _I:
            "that counts the weight matrices only: add the biases (4 of size H in attention, I and H in the FFN).",
        _LAYER_44 - 4 * _H: "add the two LayerNorms of the layer: a scale and a shift of size H each.",
        3 * _H * _H + 3 * _H + 2 * _H * _I + _I + _H + 4 * _H:
            "attention has four H×H projections: query, key, value and the output projection.",
        4 * _H * _H + 4 * _H + _H * _I + _I + 4 * _H: "the feed-forward block has two matrices: H→I and I→H.",
        Near(340_000_000 / 24, abs_tol=1.5e6):
            "340 M / 24 spreads the embeddings over the layers: count one layer's own weights.",
    },
    fallback="Q, K, V, output (4H² + 4H) + FFN (2HI + I + H) + two LayerNorms (4H), with H = 1024, I = 4096.",
)

# ---- 04.5: explain why (transfer): the tied word table learns from the decoder -----------------------------------
multiple_choice(
    "04.5",
    "You pretrain the course's tiny BERT, whose MLM decoder is tied to the word table. Suppose 300 ids of its "
    "vocabulary never occur in the training text. After pretraining, how do their rows of the word table compare "
    "with their initial values?",
    {
        "a": "Unchanged, apart from weight decay: a row of an embedding table gets a gradient only when its id is "
             "looked up in the input.",
        "b": "Changed by the loss itself: the table is also the decoder, so at every predicted position the "
             "softmax scores every word through its row, and the gradient moves the rows of never-seen words so "
             "that their logits fall.",
        "c": "They become copies of [UNK]'s row, since words the vocabulary cannot spell are mapped to [UNK].",
        "d": "Only those words' output biases change; the rows belong to the lookup, not to the head.",
    },
    "b",
    {
        "a": "true of an untied table; here the same matrix also computes every word's logit at every predicted "
             "position (section 5). Which parameters does a softmax over the whole vocabulary reach?",
        "c": "the tokenizer decides which ids a text uses; nothing in training copies one row into another.",
        "d": "a logit is row · h + bias: the gradient reaches the bias *and* the row, and the row is the word "
             "table's (section 5: only the bias is the head's own).",
    },
)
