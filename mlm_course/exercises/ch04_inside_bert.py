"""Exercises of notebook 04_inside_bert: the learner writes attention with a padding mask, the masking function and
the MLM head at the masked positions only, each checked against torch or the package; counts a layer's parameters;
and explains why the rows of never-seen words in the tied word table still change."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from transformers import BertConfig

from mlm_course.exercises import Exercise, Near, Text, multiple_choice, numeric, one_torch_thread, register

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
    "unscaled": Text("divide the scores by √d (d = head size, q.shape[-1]) before the softmax.",
                     "在 softmax 之前把分数除以 √d（d = 每个头的维度，q.shape[-1]）。"),
    "by d": Text("scale by √d, not by d: q·k has variance d, √d brings it back to 1.",
                 "按 √d 缩放，而不是按 d：q·k 的方差是 d，除以 √d 才把它拉回 1。"),
    "after softmax": (Text("the mask was applied after the softmax: the remaining weights no longer sum to 1. Set padding "
                           "scores to −∞ (or the dtype's lowest value) *before* the softmax.",
                           "掩码是在 softmax 之后施加的：剩下的权重之和不再是 1。要在 softmax *之前*"
                           "把填充位置的分数设为 −∞（或该 dtype 的最小值）。")),
    "no mask": Text("padding keys are still attended to: fill their scores with −∞ where key_mask is False.",
                    "填充位置的键仍然被关注：在 key_mask 为 False 的地方把它们的分数填成 −∞。"),
    "query mask": (Text("the mask must hide padding *keys* (the last dimension, key_mask[:, None, None, :]), not "
                        "padding queries.",
                        "掩码必须遮住填充的*键*（最后一维，key_mask[:, None, None, :]），而不是填充的查询。")),
    "wrong dim": Text("softmax over the keys (dim=-1): each query's weights must sum to 1.",
                      "在键上做 softmax（dim=-1）：每个查询的权重之和必须为 1。"),
}


def _grade_41(fn) -> Text | None:
    q, k, v, key_mask = _cases_41()
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :])
    got = torch.as_tensor(fn(q.clone(), k.clone(), v.clone(), key_mask.clone()))
    if got.shape != expected.shape:
        return Text(f"return the attention output shaped like v {tuple(expected.shape)}, got {tuple(got.shape)}.",
                    f"返回的注意力输出应与 v 形状相同（{tuple(expected.shape)}），而你的是 {tuple(got.shape)}。")
    if torch.allclose(got, expected, atol=1e-5):
        return None
    for name, wrong in _variants_41(q, k, v, key_mask).items():
        if torch.allclose(got, wrong, atol=1e-5):
            return _HINTS_41[name]
    return Text("weights = softmax(q·kᵀ/√d with padding keys at −∞, over the keys); output = weights · v.",
                "weights = softmax(q·kᵀ/√d，填充键为 −∞，在键上计算)；output = weights · v。")


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
    text=(Text("Write attention(q, k, v, key_mask) -> output: scaled dot-product attention over (batch, heads, length, "
                 "d) tensors; key_mask (batch, length) is True at real tokens and False at padding, which no query may "
                 "attend to. Checked against torch.nn.functional.scaled_dot_product_attention.",
                 "编写 attention(q, k, v, key_mask) -> output：在 (batch, heads, length, d) 张量上计算缩放点积注意力；"
                 "key_mask (batch, length) 在真实词元处为 True，在填充处为 False，任何查询都不能关注填充位置。"
                 "对照 torch.nn.functional.scaled_dot_product_attention 检查。")),
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


def _grade_42(fn) -> Text | None:
    from mlm_course.masking import IGNORE_INDEX

    ids, special = _batch_42()
    before = ids.clone()
    corrupted, labels = (torch.as_tensor(t) for t in fn(ids, special.clone(), _SPECIALS_42, _MASK_42, _VOCAB_42,
                                                       torch.Generator().manual_seed(0)))
    if not torch.equal(ids, before):
        return Text("input_ids was changed in place: work on a clone (the caller still needs the original ids).",
                    "input_ids 被原地修改了：在副本上操作（调用者还需要原始 id）。")
    if corrupted.shape != ids.shape or labels.shape != ids.shape:
        return Text(f"return (corrupted_ids, labels), both shaped like input_ids {tuple(ids.shape)}.",
                    f"返回 (corrupted_ids, labels)，两者形状都与 input_ids 相同（{tuple(ids.shape)}）。")
    if not (labels == IGNORE_INDEX).any():
        return Text("positions that were not selected need the label -100 (ignored by the loss), not an id or 0.",
                    "未被选中的位置需要标签 -100（损失忽略它们），而不是某个 id 或 0。")
    selected = labels != IGNORE_INDEX
    if (selected & special).any():
        return (Text("a special token ([CLS], [SEP], [PAD], [UNK] …) was selected: only positions where special_mask is "
                     "False may be drawn.",
                     "选中了一个特殊词元（[CLS]、[SEP]、[PAD]、[UNK] …）：只有 special_mask 为 False 的位置才能被抽中。"))
    if (labels[selected] == _MASK_42).any() and torch.equal(labels[selected], corrupted[selected]):
        return (Text("the labels were taken from the corrupted ids (they hold [MASK] = 4): labels are the *original* ids "
                     "at the selected positions — clone input_ids before corrupting them.",
                     "标签取自被破坏后的 id（其中有 [MASK] = 4）：标签是被选中位置上的*原始* id——"
                     "在破坏 input_ids 之前先复制一份。"))
    if not torch.equal(labels[selected], ids[selected]):
        return Text("at each selected position the label is the original id; everywhere else -100.",
                    "每个被选中位置的标签是原始 id；其他位置都是 -100。")
    if not torch.equal(corrupted[~selected], ids[~selected]):
        return Text("only selected positions may change; every other id stays as it was.",
                    "只有被选中的位置可以改变；其他 id 都保持原样。")
    maskable = int((~special).sum())
    if not _share_ok(int(selected.sum()), maskable, 0.15):
        return (Text(f"{selected.sum() / maskable:.3f} of the maskable tokens were selected, not 0.15: one Bernoulli(0.15) "
                     "draw per non-special token.",
                     f"可掩码词元中有 {selected.sum() / maskable:.3f} 被选中，而不是 0.15：每个非特殊词元做一次 Bernoulli(0.15) 抽样。"))
    new = corrupted[selected]
    if torch.isin(new, torch.tensor([0, 1, 2, 3])).any():
        return (Text("a random replacement was a special id ([PAD], [CLS], …): draw random tokens only from the non-special "
                     "ids, e.g. torch.randint(5, vocab_size) here, or index a tensor of allowed ids.",
                     "有一个随机替换成了特殊 id（[PAD]、[CLS]、…）：随机词元只能从非特殊 id 中抽取，"
                     "例如这里用 torch.randint(5, vocab_size)，或者从允许的 id 组成的张量中索引。"))
    n = len(new)
    n_mask, n_kept = int((new == _MASK_42).sum()), int((new == ids[selected]).sum())
    n_random = n - n_mask - n_kept
    p_collide = 1 / (_VOCAB_42 - len(_SPECIALS_42))  # a random draw equal to the original counts as unchanged
    if not (_share_ok(n_mask, n, 0.8) and _share_ok(n_random, n, 0.1 * (1 - p_collide))
            and _share_ok(n_kept, n, 0.1 + 0.1 * p_collide)):
        shares = Text(f"{n_mask / n:.1%} [MASK] / {n_random / n:.1%} random / {n_kept / n:.1%} unchanged",
                      f"{n_mask / n:.1%} [MASK] / {n_random / n:.1%} 随机 / {n_kept / n:.1%} 不变")
        if _share_ok(n_random, n, 0.02):
            return (Text(f"{shares.en}: the random coin was thrown with p = 0.1 among the 20 % left after [MASK]; it needs "
                         "p = 0.5 there (or one uniform draw u: u < 0.8 → [MASK], u < 0.9 → random).",
                         f"{shares.zh}：随机那枚硬币是在 [MASK] 之后剩下的 20 % 中以 p = 0.1 抛的；"
                         "那里需要 p = 0.5（或者只抽一个均匀数 u：u < 0.8 → [MASK]，u < 0.9 → 随机）。"))
        return Text(f"{shares.en}: aim for 80 % [MASK], 10 % random, 10 % unchanged among the selected positions.",
                    f"{shares.zh}：被选中的位置中，目标是 80 % [MASK]、10 % 随机、10 % 不变。")
    again = fn(ids, special.clone(), _SPECIALS_42, _MASK_42, _VOCAB_42, torch.Generator().manual_seed(0))
    if not all(torch.equal(torch.as_tensor(a), b) for a, b in zip(again, (corrupted, labels), strict=True)):
        return Text("pass the generator to every random draw (torch.rand(..., generator=generator)): same seed, same masks.",
                    "每次随机抽样都要传入 generator（torch.rand(..., generator=generator)）：相同的随机种子，相同的掩码。")
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
    text=(Text("Write mask_tokens(input_ids, special_mask, special_ids, mask_id, vocab_size, generator) -> "
                 "(corrupted_ids, labels): select each token whose special_mask is False with probability 0.15 (Bernoulli); "
                 "of the selected, 80 % become mask_id, 10 % a random non-special id, 10 % stay; labels are the original "
                 "id at selected positions and -100 elsewhere. Do not modify input_ids; draw with the generator.",
                 "编写 mask_tokens(input_ids, special_mask, special_ids, mask_id, vocab_size, generator) -> "
                 "(corrupted_ids, labels)：每个 special_mask 为 False 的词元以概率 0.15 被选中（伯努利）；"
                 "被选中的词元中 80 % 变成 mask_id，10 % 变成随机的非特殊 id，10 % 保持不变；"
                 "标签在被选中位置是原始 id，其他位置是 -100。不要修改 input_ids；用 generator 抽样。")),
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

# ---- 04.3: the MLM head at the positions to predict only (BERT's sparse prediction) ------------------------------


def _setup_43():
    """(a small BertMLM in eval mode, input ids, attention mask, flat positions to predict, the last hidden state).

    The head's biases and LayerNorm are drawn at random too (fresh ones are 0 and 1), so that leaving one out
    changes the logits."""
    from mlm_course.bert import BertMLM

    config = BertConfig(vocab_size=53, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    model = BertMLM(config, seed=43).eval()
    g = torch.Generator().manual_seed(43)
    with torch.no_grad():
        for param in (model.head.bias, model.head.dense.bias, model.head.norm.bias):
            param.copy_(torch.randn(param.shape, generator=g))
        model.head.norm.weight.copy_(1 + 0.5 * torch.randn(config.hidden_size, generator=g))
        ids = torch.randint(5, 53, (3, 12), generator=g)
        mask = (torch.arange(12)[None, :] < torch.tensor([12, 8, 5])[:, None]).long()
        ids[mask == 0] = 0
        chosen = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
        chosen[:, 1] = True  # every row predicts at least one token
        positions = chosen.flatten().nonzero().squeeze(1)  # flat indices into batch × length
        return model, ids, mask, positions, model.last_hidden_state(ids, mask)


_FLATTEN_43 = (Text("positions are flat indices into batch × length (up to batch·length − 1), but hidden's first "
                    "dimension is the batch: index hidden.flatten(0, 1), a (batch·length, H) tensor, with them.",
                    "positions 是 batch × length 上的展平下标（最大到 batch·length − 1），但 hidden 的第一维是批量："
                    "要用它们去索引 hidden.flatten(0, 1)，一个 (batch·length, H) 的张量。"))


def _run_43(fn, model, hidden, positions) -> tuple[object, int, bool]:
    """(what fn returns, the most rows the head's dense layer or LayerNorm saw in one call, whether model.head ran)."""
    rows, head_ran = [0], []
    hooks = [part.register_forward_hook(lambda module, args, out: rows.append(args[0].numel() // args[0].shape[-1]))
             for part in (model.head.dense, model.head.norm)]
    hooks.append(model.head.register_forward_pre_hook(lambda module, args: head_ran.append(True)))
    try:
        with torch.no_grad():
            return fn(model, hidden.clone(), positions.clone()), max(rows), bool(head_ran)
    finally:
        for hook in hooks:
            hook.remove()


def _grade_43(fn) -> Text | None:
    with one_torch_thread():
        return _compare_43(fn)


def _compare_43(fn) -> Text | None:
    model, ids, mask, positions, hidden = _setup_43()
    with torch.no_grad():
        expected = model(ids, mask, positions=positions)  # the package's sparse head
        gathered = model(ids, mask).flatten(0, 1)[positions]  # every position projected, then the chosen kept
    try:
        got, rows, head_ran = _run_43(fn, model, hidden, positions)
    except IndexError:
        return _FLATTEN_43
    if head_ran:
        return (Text("write the head out of its parts (model.head.dense, GELU, model.head.norm, the word table, "
                     "model.head.bias) instead of calling model.head or model(...): the exercise is what the head computes.",
                     "用各个部件写出这个头（model.head.dense、GELU、model.head.norm、词嵌入表、model.head.bias），"
                     "不要调用 model.head 或 model(...)：这道练习要的就是这个头计算了什么。"))
    got = torch.as_tensor(got)
    if got.shape == (len(positions), model.config.hidden_size):
        return (Text("that is the transformed hidden state, (positions, H): the decoder then scores it against every "
                     "word, with the word table as its weight (tied): F.linear(h, model.embeddings.word.weight, bias).",
                     "这是变换后的隐藏状态 (positions, H)：接下来解码器要以词嵌入表为权重（绑定）给每个词打分："
                     "F.linear(h, model.embeddings.word.weight, bias)。"))
    if got.dim() == 3:
        return _FLATTEN_43
    if got.shape != expected.shape:
        return Text(f"return logits of shape (len(positions), vocab) = {tuple(expected.shape)}, not {tuple(got.shape)}.",
                    f"返回形状为 (len(positions), vocab) = {tuple(expected.shape)} 的 logits，而不是 {tuple(got.shape)}。")
    if not (torch.allclose(got, expected, atol=1e-5) and torch.allclose(got, gathered, atol=1e-5)):
        if torch.allclose(got, expected - model.head.bias, atol=1e-5):
            return Text("add the output bias model.head.bias: logits = h · Wᵀ + b, one b per word.",
                        "加上输出偏置 model.head.bias：logits = h · Wᵀ + b，每个词一个 b。")
        return (Text("logits = LayerNorm(GELU(dense(h))) · Wᵀ + b with h = hidden.flatten(0, 1)[positions], W the word "
                     "table model.embeddings.word.weight (tied) and b = model.head.bias.",
                     "logits = LayerNorm(GELU(dense(h))) · Wᵀ + b，其中 h = hidden.flatten(0, 1)[positions]，"
                     "W 是词嵌入表 model.embeddings.word.weight（绑定），b = model.head.bias。"))
    if rows > len(positions):
        return (Text(f"right numbers, but the head ran at {rows} positions for {len(positions)} predictions: gather the "
                     "positions first, then apply the head, so the vocabulary projection runs only where a token is "
                     "predicted (about 15 % of the positions in pretraining).",
                     f"数值对了，但这个头在 {rows} 个位置上运行，而只需做 {len(positions)} 个预测：先取出这些位置，"
                     "再应用这个头，让词表投影只在要预测词元的地方运行（预训练中约占位置的 15 %）。"))
    return None


def _solution_43():
    def head_at(model, hidden, positions):
        chosen = hidden.flatten(0, 1)[positions]  # (len(positions), H): only the positions to predict
        h = model.head.norm(F.gelu(model.head.dense(chosen)))  # the transform: dense, GELU, LayerNorm
        return F.linear(h, model.embeddings.word.weight, model.head.bias)  # the tied decoder h · Wᵀ, plus the bias

    return head_at


def _head_variant(name, *, gather="first", bias=True, decoder=True, call_head=False):
    def head_at(model, hidden, positions):
        if call_head:
            return model.head(hidden.flatten(0, 1)[positions], model.embeddings.word.weight)
        chosen = {"first": lambda: hidden.flatten(0, 1)[positions], "unflattened": lambda: hidden[positions],
                  "after": lambda: hidden}[gather]()
        h = model.head.norm(F.gelu(model.head.dense(chosen)))
        if not decoder:
            return h
        logits = F.linear(h, model.embeddings.word.weight, model.head.bias if bias else None)
        return logits.flatten(0, 1)[positions] if gather == "after" else logits

    head_at.__name__ = head_at.__qualname__ = name
    return head_at


register(Exercise(
    id="04.3",
    text=(Text("Write head_at(model, hidden, positions) -> logits: BERT's sparse prediction, the MLM head of our "
                 "BertMLM applied only at the flat positions `positions` (indices into batch × length, as "
                 "objective.masked_positions gives them) of `hidden`, the last layer's output (batch, length, H). Write "
                 "the head out of its parts: model.head.dense, GELU, model.head.norm, then the decoder tied to the word "
                 "table model.embeddings.word.weight, plus the output bias model.head.bias (do not call model.head or "
                 "model(...)). Checked against model(input_ids, attention_mask, positions=positions) and against the "
                 "full logits at those positions; the head may see only len(positions) rows.",
                 "编写 head_at(model, hidden, positions) -> logits：BERT 的稀疏预测，即我们的 BertMLM 的 MLM 头，"
                 "只作用在 `hidden`（最后一层的输出 (batch, length, H)）的展平位置 `positions` 上"
                 "（batch × length 上的下标，与 objective.masked_positions 给出的一样）。用各个部件写出这个头："
                 "model.head.dense、GELU、model.head.norm，然后是与词嵌入表 model.embeddings.word.weight 绑定的解码器，"
                 "再加上输出偏置 model.head.bias（不要调用 model.head 或 model(...)）。"
                 "对照 model(input_ids, attention_mask, positions=positions) 以及这些位置上的完整 logits 检查；"
                 "这个头只能看到 len(positions) 行。")),
    grade=_grade_43,
    solution=_solution_43,
    wrong_answers=(_head_variant("head_at_without_bias", bias=False),
                   _head_variant("head_at_without_decoder", decoder=False),
                   _head_variant("head_at_projecting_every_position", gather="after"),
                   _head_variant("head_at_unflattened", gather="unflattened"),
                   _head_variant("head_at_calling_the_head", call_head=True)),
))

# ---- 04.4: parameters of one encoder layer of BERT-large (the notebook prints BERT-base's counts only) ------------
_H, _I = 1024, 4096
_LAYER_44 = 4 * _H * _H + 4 * _H + 2 * _H * _I + _I + _H + 4 * _H  # 12,596,224
_BASE_LAYER = 4 * 768 * 768 + 4 * 768 + 2 * 768 * 3072 + 3072 + 768 + 4 * 768  # 7,087,872: BERT-base's layer

numeric(
    "04.4",
    Text("How many parameters does one encoder layer of BERT-large have (H = 1024, I = 4096, 16 heads; biases and "
         "LayerNorms included)? Give an integer.",
         "BERT-large 的一个编码器层有多少参数（H = 1024，I = 4096，16 个头；包括偏置和 LayerNorm）？"
         "给出一个整数。"),
    _LAYER_44,
    wrong={
        _BASE_LAYER: Text("that is one layer of BERT-base (H = 768, I = 3072); BERT-large has H = 1024, I = 4096.",
                          "这是 BERT-base 的一层（H = 768，I = 3072）；BERT-large 是 H = 1024，I = 4096。"),
        4 * _H * _H + 2 * _H * _I:
            Text("that counts the weight matrices only: add the biases (4 of size H in attention, I and H in the FFN).",
                 "这只数了权重矩阵：还要加上偏置（注意力中 4 个大小为 H 的，前馈层中大小为 I 和 H 的各一个）。"),
        _LAYER_44 - 4 * _H: Text("add the two LayerNorms of the layer: a scale and a shift of size H each.",
                                 "加上这一层的两个 LayerNorm：各有一个大小为 H 的缩放和一个大小为 H 的平移。"),
        3 * _H * _H + 3 * _H + 2 * _H * _I + _I + _H + 4 * _H:
            Text("attention has four H×H projections: query, key, value and the output projection.",
                 "注意力有四个 H×H 投影：查询、键、值和输出投影。"),
        4 * _H * _H + 4 * _H + _H * _I + _I + 4 * _H: Text("the feed-forward block has two matrices: H→I and I→H.",
                                                           "前馈层有两个矩阵：H→I 和 I→H。"),
        Near(340_000_000 / 24, abs_tol=1.5e6):
            Text("340 M / 24 spreads the embeddings over the layers: count one layer's own weights.",
                 "340 M / 24 把嵌入也分摊到了各层：只数一层自己的权重。"),
    },
    fallback=Text("Q, K, V, output (4H² + 4H) + FFN (2HI + I + H) + two LayerNorms (4H), with H = 1024, I = 4096.",
                  "Q、K、V、输出 (4H² + 4H) + 前馈层 (2HI + I + H) + 两个 LayerNorm (4H)，其中 H = 1024，I = 4096。"),
)

# ---- 04.5: explain why (transfer): the tied word table learns from the decoder -----------------------------------
multiple_choice(
    "04.5",
    Text("You pretrain the course's tiny BERT, whose MLM decoder is tied to the word table. Suppose 300 ids of its "
         "vocabulary never occur in the training text. After pretraining, how do their rows of the word table compare "
         "with their initial values?",
         "你预训练课程的小 BERT，它的 MLM 解码器与词嵌入表绑定。假设词表中有 300 个 id 从未在训练文本中出现。"
         "预训练之后，它们在词嵌入表中的行与初始值相比如何？"),
    {
        "a": Text("Unchanged, apart from weight decay: a row of an embedding table gets a gradient only when its id is "
                  "looked up in the input, and these 300 ids never are.",
                  "不变（除了权重衰减）：嵌入表的一行只有在它的 id 被输入查到时才得到梯度，"
                  "而这 300 个 id 从来没有被查到。"),
        "b": Text("Changed: the tied table also scores every word at every predicted position, so the softmax's gradient "
                  "reaches those rows too and pushes their logits down.",
                  "变了：绑定的词嵌入表还要在每个预测位置给每个词打分，所以 softmax 的梯度也会到达这些行，"
                  "把它们的 logits 往下压。"),
        "c": Text("They become copies of [UNK]'s row: ids that the training text never uses are mapped to [UNK], so their "
                  "rows are trained together with [UNK]'s, as one word.",
                  "它们变成 [UNK] 那一行的副本：训练文本从不使用的 id 会被映射成 [UNK]，"
                  "所以它们的行与 [UNK] 的行一起训练，就像同一个词。"),
        "d": Text("Only their output biases change, pushed down by the softmax; the rows belong to the input lookup, not "
                  "to the head, so they stay at their initial values.",
                  "只有它们的输出偏置会变，被 softmax 往下压；这些行属于输入查找，而不属于这个头，"
                  "所以保持初始值。"),
    },
    "b",
    {
        "a": Text("true of an untied table; here the same matrix also computes every word's logit at every predicted "
                  "position (section 5). Which parameters does a softmax over the whole vocabulary reach?",
                  "对未绑定的表来说是这样；但这里同一个矩阵还要在每个预测位置计算每个词的 logit（第 5 节）。"
                  "对整个词表做 softmax 会到达哪些参数？"),
        "c": Text("the tokenizer decides which ids a text uses; nothing in training copies one row into another.",
                  "文本使用哪些 id 由分词器决定；训练中没有任何东西会把一行复制到另一行。"),
        "d": Text("a logit is row · h + bias: the gradient reaches the bias *and* the row, and the row is the word "
                  "table's (section 5: only the bias is the head's own).",
                  "logit 是 row · h + bias：梯度既到达 bias *也*到达 row，而 row 就是词嵌入表中的行"
                  "（第 5 节：只有 bias 是这个头自己的）。"),
    },
)
