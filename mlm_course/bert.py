"""BERT's encoder and masked-LM head written out in plain PyTorch, loadable from any transformers BERT checkpoint.

One class per idea, in the order the data flows: embeddings → (self-attention → add & norm → feed-forward → add &
norm) × L → MLM head (dense, GELU, LayerNorm, decoder tied to the word embeddings, output bias). The pooler (the
[CLS] vector through dense + tanh, which fed BERT's next-sentence head) is here too; ``BertForMaskedLM`` has none.

``parameter_count`` and ``flops_per_token`` are closed forms from a ``BertConfig`` alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig


def check_config(config: BertConfig) -> BertConfig:
    """``config`` unchanged if this module implements it exactly; a ValueError naming the setting otherwise."""
    refusals = {
        "position_embedding_type": (getattr(config, "position_embedding_type", "absolute"), "absolute"),
        "is_decoder": (bool(getattr(config, "is_decoder", False)), False),
        "add_cross_attention": (bool(getattr(config, "add_cross_attention", False)), False),
        "hidden_act": (config.hidden_act, "gelu"),
        "tie_word_embeddings": (bool(getattr(config, "tie_word_embeddings", True)), True),
    }
    for name, (value, supported) in refusals.items():
        if value != supported:
            raise ValueError(f"config.{name} = {value!r} is not implemented here: this BERT supports only "
                             f"{name} = {supported!r} (the original encoder)")
    if config.hidden_size % config.num_attention_heads:
        raise ValueError(f"config.hidden_size = {config.hidden_size} is not divisible by config.num_attention_heads = "
                         f"{config.num_attention_heads}: pick a head count that divides the hidden size")
    return config


# ---- counts in closed form -----------------------------------------------------------------------------------------


def parameter_count(config: BertConfig) -> dict[str, int]:
    """Parameters by part, in closed form (H hidden, L layers, I FFN, V vocabulary, P positions, T segments).

    - ``embeddings`` = (V + P + T)·H + 2H (three tables and a LayerNorm). The word table is also the MLM decoder's
      weight (tied), so it is counted once, here.
    - ``encoder`` = L·(4H² + 2HI + 9H + I): Q, K, V, output (4H² + 4H), two LayerNorms (4H), FFN (2HI + I + H).
    - ``mlm_head`` = H² + H + 2H + V: dense, LayerNorm and the output bias (the decoder's weight is the word table).
    - ``pooler`` = H² + H. ``BertForMaskedLM`` has no pooler, so it is **not** in ``total``.
    - ``total`` = embeddings + encoder + mlm_head = ``sum(p.numel())`` of ``BertForMaskedLM``.

    The paper's "110 M" for BERT-base is ``BertModel``: embeddings + encoder + pooler.
    """
    check_config(config)
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    counts = {
        "embeddings": (v + config.max_position_embeddings + config.type_vocab_size) * h + 2 * h,
        "encoder": config.num_hidden_layers * (4 * h * h + 2 * h * i + 9 * h + i),
        "mlm_head": h * h + 3 * h + v,
        "pooler": h * h + h,
    }
    counts["total"] = counts["embeddings"] + counts["encoder"] + counts["mlm_head"]
    return counts


def matmul_parameters(config: BertConfig, *, head_share: float = 1.0) -> float:
    """N of the 6·N rule: weights that multiply each token's vector, per token, without biases or LayerNorms.

    Per layer 4H² (Q, K, V, output) + 2HI (FFN); the MLM head adds H² + VH (dense + decoder) at the share of
    positions where it runs (1 for logits everywhere; the course's pretraining runs it at the masked 15 % only).
    Embedding lookups are not products, so the tables count only as the decoder.
    """
    if not 0.0 <= head_share <= 1.0:
        raise ValueError(f"head_share is the share of positions the MLM head runs at: give 0…1, not {head_share}")
    check_config(config)
    h, i = config.hidden_size, config.intermediate_size
    return config.num_hidden_layers * (4 * h * h + 2 * h * i) + head_share * (h * h + config.vocab_size * h)


def flops_per_token(config: BertConfig, seq_len: int, *, training: bool = True, head_share: float = 1.0) -> float:
    """Matrix-multiply FLOPs per token of one forward (``training=False``) or forward + backward pass.

    Forward: 2·N (a multiply and an add per weight, N = :func:`matmul_parameters`) plus attention's two products
    QKᵀ and softmax·V, 2·seq_len·H each per layer: 2N + 4·L·seq_len·H. The backward pass costs twice the forward
    (a gradient for the input and one for the weight of every product), so training is 6N + 12·L·seq_len·H.
    This is the accounting of Kaplan et al. 2020 (Table 1, C ≈ 6N) and Hoffmann et al. 2022 (Chinchilla, App. F),
    who also count both attention products; softmax, LayerNorm, GELU and biases (O(H) per token) are left out.
    The pooler is left out (one vector per sequence, and ``BertForMaskedLM`` has none).
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"seq_len={seq_len} is longer than the {config.max_position_embeddings} positions this model "
                         "knows: count FLOPs at a length it can run.")
    forward = 2 * matmul_parameters(config, head_share=head_share) + 4 * config.num_hidden_layers * seq_len * (
        config.hidden_size
    )
    return 3 * forward if training else forward


# ---- the model -------------------------------------------------------------------------------------------------------


class Embeddings(nn.Module):
    """Token + position + segment vectors, summed, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        # padding_idx: the [PAD] row gets no gradient from the lookup (as in transformers)
        self.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.segment = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        summed = self.word(input_ids) + self.segment(token_type_ids) + self.position(positions)
        return self.dropout(self.norm(summed))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None = None,
              dropout: nn.Module | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention over (batch, heads, length, head size): (output, weights).

    ``key_mask`` (batch, length) is True at real tokens: padding keys get −∞ (the dtype's lowest value, so a row of
    only padding stays finite) *before* the softmax, so their weights are exactly 0.
    """
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, None, :], torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return (dropout(weights) if dropout is not None else weights) @ v, weights


class SelfAttention(nn.Module):
    """Multi-head self-attention: project to Q, K, V, split into heads, attend, join the heads, project back."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.heads = config.num_attention_heads
        self.query, self.key, self.value, self.out = (
            nn.Linear(config.hidden_size, config.hidden_size) for _ in range(4)
        )
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length, hidden = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:  # (batch, length, hidden) -> (batch, heads, length, head size)
            return t.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)

        context, weights = attention(split(self.query(x)), split(self.key(x)), split(self.value(x)), key_mask,
                                     self.dropout)
        return self.out(context.transpose(1, 2).reshape(batch, length, hidden)), weights


class FeedForward(nn.Module):
    """Position-wise: up to the intermediate size, GELU (erf form), back down."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class EncoderLayer(nn.Module):
    """Post-LN block: x = norm(x + dropout(attention(x))); x = norm(x + dropout(ffn(x)))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attention(x, key_mask)
        x = self.attention_norm(x + self.dropout(attended))
        return self.ffn_norm(x + self.dropout(self.ffn(x))), weights


class MLMHead(nn.Module):
    """Dense + GELU + LayerNorm, then logits = h · Wᵀ + b with W the word-embedding table (tied) and b per token."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(x))), word_embeddings, self.bias)  # h · Wᵀ + b


class Pooler(nn.Module):
    """tanh(dense(hidden state of [CLS])): the sentence vector the next-sentence head was trained on."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


@dataclass
class Encoding:
    """What :meth:`BertMLM.encode` returns: every layer's output and attention weights."""

    hidden_states: list[torch.Tensor]  # L + 1 tensors (batch, length, hidden): the embeddings, then each layer
    attentions: list[torch.Tensor]  # L tensors (batch, heads, length, length); rows are queries, columns keys

    @property
    def last(self) -> torch.Tensor:
        return self.hidden_states[-1]


class BertMLM(nn.Module):
    """BERT encoder + MLM head (+ the pooler when ``with_pooler``); ``forward`` returns (batch, length, vocab) logits."""

    def __init__(self, config: BertConfig, *, with_pooler: bool = False):
        super().__init__()
        self.config = check_config(config)
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))
        self.head = MLMHead(config)
        self.pooler = Pooler(config) if with_pooler else None

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               token_type_ids: torch.Tensor | None = None) -> Encoding:
        """Every layer's hidden states and attention weights; ``attention_mask`` is 1 at real tokens, 0 at padding."""
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise ValueError(f"{input_ids.shape[1]} tokens, but the model knows only "
                             f"{self.config.max_position_embeddings} positions: truncate the input")
        key_mask = None if attention_mask is None else attention_mask.bool()
        x = self.embeddings(input_ids, torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids)
        encoding = Encoding(hidden_states=[x], attentions=[])
        for layer in self.layers:
            x, weights = layer(x, key_mask)
            encoding.hidden_states.append(x)
            encoding.attentions.append(weights)
        return encoding

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.encode(input_ids, attention_mask, token_type_ids).last
        return self.head(hidden, self.embeddings.word.weight)

    @classmethod
    def from_transformers(cls, model: nn.Module) -> BertMLM:
        """Ours, with a copy of the weights of a transformers ``BertForMaskedLM`` (or ``BertModel``: random head)."""
        source = {name: tensor for name, tensor in model.state_dict().items() if our_name(name) is not None}
        with_pooler = any(name.startswith(("pooler.", "bert.pooler.")) for name in source)
        template = next(model.parameters())
        ours = cls(model.config, with_pooler=with_pooler).to(device=template.device, dtype=template.dtype)
        weights = {our_name(name): tensor.detach().clone() for name, tensor in source.items()}
        missing, unexpected = ours.load_state_dict(weights, strict=False)
        allowed = {name for name, _ in ours.head.named_parameters(prefix="head")} if not hasattr(model, "cls") else set()
        if set(missing) - allowed or unexpected:
            raise ValueError(f"the checkpoint does not fit this BERT: missing {missing}, unexpected {unexpected}")
        return ours.train(model.training)

    @classmethod
    def load(cls, name_or_folder: str) -> BertMLM:
        """Ours, from any name ``models.load_mlm`` understands (``"course"``, ``"minilm"``, a folder), in eval mode."""
        from mlm_course import models

        model, _ = models.load_mlm(name_or_folder)
        return cls.from_transformers(model).eval()


#: transformers parameter names → ours (applied in order; the tied decoder maps to nothing)
_RENAMES = (
    (r"^bert\.", ""),
    (r"^embeddings\.word_embeddings\.", "embeddings.word."),
    (r"^embeddings\.position_embeddings\.", "embeddings.position."),
    (r"^embeddings\.token_type_embeddings\.", "embeddings.segment."),
    (r"^embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"layers.\1.attention.\2."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"layers.\1.attention.out."),
    (r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"layers.\1.attention_norm."),
    (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"layers.\1.ffn.up."),
    (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"layers.\1.ffn.down."),
    (r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"layers.\1.ffn_norm."),
    (r"^cls\.predictions\.transform\.dense\.", "head.dense."),
    (r"^cls\.predictions\.transform\.LayerNorm\.", "head.norm."),
    (r"^cls\.predictions\.bias$", "head.bias"),
)


def our_name(transformers_name: str) -> str | None:
    """Our name for a transformers BERT parameter; None for the tied decoder and for buffers (position ids)."""
    if transformers_name.startswith("cls.predictions.decoder.") or transformers_name.endswith(
        ("position_ids", "token_type_ids")
    ):
        return None
    name = transformers_name
    for pattern, replacement in _RENAMES:
        name = re.sub(pattern, replacement, name)
    return name



def head_targets(weights: torch.Tensor, attention_mask: torch.Tensor, input_ids: torch.Tensor,
                 specials: dict[str, int]) -> dict[str, torch.Tensor]:
    """Mean attention weight per head, over the real query tokens of a batch, on the previous token, the same
    token, the next token and on each special token in ``specials`` ({name: id}); ``weights`` (batch, heads, L, L)."""
    queries = attention_mask.bool()
    length, count = queries.shape[1], queries.sum()
    targets = {}
    for name, offset in (("previous token", -1), ("same token", 0), ("next token", 1)):
        on_diagonal = torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1)  # query i → key i + offset
        rows = queries[:, max(-offset, 0): length - max(offset, 0)]
        targets[name] = (on_diagonal * rows[:, None, :]).sum((0, 2)) / count
    for name, token_id in specials.items():
        on_token = (weights * (input_ids == token_id)[:, None, None, :]).sum(-1)
        targets[name] = (on_token * queries[:, None, :]).sum((0, 2)) / count
    return targets
