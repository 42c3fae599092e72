"""BERT in plain PyTorch: the encoder, the masked-LM head and the classification head, loadable from and savable
to transformers folders (:mod:`mlm_course.bert_io` maps the names).

One class per idea, in the order the data flows: embeddings → (self-attention → add & norm → feed-forward → add &
norm) × L → a head. :class:`BertMLM` ends in the MLM head (dense, GELU, LayerNorm, decoder tied to the word
embeddings, output bias); :class:`BertClassifier` in the pooler (the [CLS] vector through dense + tanh, which fed
BERT's next-sentence head) and a linear layer. Both share :class:`BertEncoder`.

``parameter_count`` and ``flops_per_token`` are closed forms from a ``BertConfig`` alone.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig

from mlm_course import bert_io
from mlm_course.bert_io import our_name


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


def expand_key_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """A (batch, keys) padding mask as (batch, 1, 1, keys): the same keys hidden from every head and query."""
    return mask[:, None, None, :] if mask is not None and mask.dim() == 2 else mask


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              dropout: nn.Module | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention over (batch, heads, length, head size): (output, weights).

    ``mask`` is True (or 1) where a query may look at a key: (batch, keys), True at real tokens, or any shape that
    broadcasts to the scores (batch, heads, queries, keys). Hidden keys get −∞ (the dtype's lowest value, so a row
    with no key left stays finite) *before* the softmax, so their weights are exactly 0. A float mask is added.
    """
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    mask = expand_key_mask(mask)
    if mask is not None and mask.is_floating_point():
        scores = scores + mask
    elif mask is not None:
        scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return (dropout(weights) if dropout is not None else weights) @ v, weights


class SelfAttention(nn.Module):
    """Multi-head self-attention: project to Q, K, V, split into heads, attend, join the heads, project back.

    With ``output_attentions`` the heads attend with :func:`attention` (written out) and its weights come back;
    without, torch's fused ``scaled_dot_product_attention`` computes the same function faster and keeps no weights.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.heads = config.num_attention_heads
        self.query, self.key, self.value, self.out = (
            nn.Linear(config.hidden_size, config.hidden_size) for _ in range(4)
        )
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, *,
                output_attentions: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, hidden = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:  # (batch, length, hidden) -> (batch, heads, length, head size)
            return t.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if output_attentions:
            context, weights = attention(q, k, v, mask, self.dropout)
        else:
            context, weights = F.scaled_dot_product_attention(
                q, k, v, attn_mask=expand_key_mask(mask), dropout_p=self.dropout.p if self.training else 0.0,
                scale=q.shape[-1] ** -0.5), None
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

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, *,
                output_attentions: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.attention(x, mask, output_attentions=output_attentions)
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
    """What :meth:`BertEncoder.encode` returns: every layer's output and (when asked for) attention weights."""

    hidden_states: list[torch.Tensor]  # L + 1 tensors (batch, length, hidden): the embeddings, then each layer
    attentions: list[torch.Tensor] | None  # L tensors (batch, heads, length, length); rows are queries, columns keys

    @property
    def last(self) -> torch.Tensor:
        return self.hidden_states[-1]


def attention_mask_4d(attention_mask: torch.Tensor | None, batch: int, length: int,
                      heads: int) -> torch.Tensor | None:
    """``attention_mask`` checked and in the form the layers take (None: every token sees every token).

    - (batch, length), 1 (or True) at real tokens, 0 at padding: (batch, 1, 1, length) bool. Its values are not
      looked at (on a GPU that would make the host wait): leave the mask out when nothing is padding, as the
      command line's batches do, and torch may pick its fastest kernel;
    - (batch, length, length), which keys each query may see: (batch, 1, length, length) bool;
    - 4-D, broadcastable to (batch, heads, length, length): bool (True = may attend) or float (added to the scores).
    """
    if attention_mask is None:
        return None
    shape = tuple(attention_mask.shape)
    if shape == (batch, length):
        return attention_mask.bool()[:, None, None, :]
    if shape == (batch, length, length):
        return attention_mask.bool()[:, None]
    if len(shape) == 4 and all(n in (1, full) for n, full in zip(shape, (batch, heads, length, length), strict=True)):
        return attention_mask if attention_mask.is_floating_point() else attention_mask.bool()
    raise ValueError(f"attention_mask has shape {shape}, which does not fit input_ids of shape ({batch}, {length}): "
                     f"give (batch, length) = ({batch}, {length}) with 1 at real tokens and 0 at padding, (batch, "
                     f"length, length) = ({batch}, {length}, {length}) for which keys each query sees, or a 4-D "
                     f"mask that broadcasts to (batch, heads, length, length) = ({batch}, {heads}, {length}, {length})")


@torch.no_grad()
def init_weights(model: nn.Module, std: float, generator: torch.Generator | None = None) -> None:
    """Fresh weights as transformers draws them (``BertPreTrainedModel._init_weights``): Linear and Embedding
    weights normal(0, std), the padding row 0, biases 0, LayerNorm weights 1 and biases 0, the MLM output bias 0."""
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Embedding):
            module.weight.normal_(0.0, std, generator=generator)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight[module.padding_idx] = 0.0
        if isinstance(module, nn.LayerNorm):
            module.weight.fill_(1.0)
        if isinstance(module, nn.Linear | nn.LayerNorm | MLMHead) and module.bias is not None:
            module.bias.zero_()


ATTENTION = ("sdpa", "eager")


class BertEncoder(nn.Module):
    """What every BERT here shares: the embeddings and the L encoder layers, run by :meth:`encode`.

    ``attention`` is how :meth:`forward` attends: ``"sdpa"`` (torch's fused kernel: fast, no weights kept, the
    arithmetic of transformers' default) or ``"eager"`` (:func:`attention` written out: transformers' eager one).
    ``seed`` draws the fresh weights (:func:`init_weights`) from its own generator; None uses torch's global one.
    """

    ARCHITECTURE = ""  #: the transformers class a saved folder names
    FRESH: tuple[str, ...] = ()  #: parts a checkpoint may lack (they keep their fresh weights)
    IGNORED: tuple[str, ...] = ()  #: parts of a checkpoint this model has no place for (another task's head)

    def __init__(self, config: BertConfig, *, attention: str = "sdpa"):
        super().__init__()
        if attention not in ATTENTION:
            raise ValueError(f"attention={attention!r}: choose 'sdpa' (fused, fast) or 'eager' (written out)")
        self.config = check_config(copy.deepcopy(config))
        self.attention_implementation = attention
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def reset_weights(self, seed: int | None) -> None:
        """Every weight drawn afresh (a subclass calls it once its heads are built)."""
        device = next(self.parameters()).device
        generator = None if seed is None else torch.Generator(device).manual_seed(seed)
        init_weights(self, self.config.initializer_range, generator)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               token_type_ids: torch.Tensor | None = None, *, output_attentions: bool = True) -> Encoding:
        """Every layer's hidden states and, with ``output_attentions``, its attention weights (from :func:`attention`,
        written out). ``attention_mask``: 1 at real tokens, 0 at padding (other forms: :func:`attention_mask_4d`)."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, length), not of shape {tuple(input_ids.shape)}")
        batch, length = input_ids.shape
        if length > self.config.max_position_embeddings:
            raise ValueError(f"{length} tokens, but the model knows only "
                             f"{self.config.max_position_embeddings} positions: truncate the input")
        mask = attention_mask_4d(attention_mask, batch, length, self.config.num_attention_heads)
        x = self.embeddings(input_ids, torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids)
        encoding = Encoding(hidden_states=[x], attentions=[] if output_attentions else None)
        for layer in self.layers:
            x, weights = layer(x, mask, output_attentions=output_attentions)
            encoding.hidden_states.append(x)
            if output_attentions:
                encoding.attentions.append(weights)
        return encoding

    def last_hidden_state(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                          token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The last layer's output, attending the model's way (``attention``)."""
        eager = self.attention_implementation == "eager"
        return self.encode(input_ids, attention_mask, token_type_ids, output_attentions=eager).last

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, *, vocab_size: int | None = None, seed: int = 0,
                        attention: str = "sdpa", **config_overrides):
        """Ours from a transformers BERT folder (written by ``BertForMaskedLM``, ``BertForPreTraining``,
        ``BertModel`` or ``BertForSequenceClassification``), weights in fp32, in eval mode (as transformers).

        Parts the folder lacks (MiniLM's ``BertModel`` has no MLM head; a masked LM has no classifier) are drawn
        fresh from ``seed``; parts this model has no place for (a next-sentence head) are left out. ``vocab_size``
        (the tokenizer's) must equal the checkpoint's; ``config_overrides`` replace config values (dropout, say).
        """
        config, tensors = bert_io.read_folder(folder, vocab_size=vocab_size, **config_overrides)
        try:
            check_config(config)
        except ValueError as exc:
            raise ValueError(f"{folder} is a BERT this module does not implement: {exc}") from None
        return cls._from_tensors(config, tensors, seed=seed, attention=attention).eval()

    @classmethod
    def from_transformers(cls, model: nn.Module, *, attention: str | None = None, seed: int = 0):
        """Ours with a copy of an in-memory transformers BERT's weights (the classes :meth:`from_pretrained`
        reads), on its device, in its dtype and mode; ``attention`` defaults to the model's own (eager or SDPA)."""
        if attention is None:
            attention = "eager" if model.config._attn_implementation == "eager" else "sdpa"
        template = next(model.parameters())
        ours = cls._from_tensors(model.config, model.state_dict(), seed=seed, attention=attention,
                                 device=template.device, dtype=template.dtype)
        return ours.train(model.training)

    @classmethod
    def _from_tensors(cls, config: BertConfig, tensors: dict[str, torch.Tensor], *, seed: int, attention: str,
                      device: torch.device | None = None, dtype: torch.dtype | None = None):
        """Ours from tensors by transformers name: fresh parts from ``seed``, the rest copied in."""
        weights = {ours: t for name, t in tensors.items()
                   if (ours := our_name(name)) is not None and not ours.startswith(cls.IGNORED)}
        model = cls._fresh(config, weights, seed=seed, attention=attention).to(device=device, dtype=dtype)
        return bert_io.copy_in(model, weights, fresh=cls.FRESH)

    @classmethod
    def _fresh(cls, config: BertConfig, weights: dict[str, torch.Tensor], *, seed: int, attention: str):
        raise NotImplementedError  # each model knows which of its parts the weights decide

    def save_pretrained(self, folder: str | os.PathLike) -> Path:
        """A transformers folder (``config.json`` naming :attr:`ARCHITECTURE`, ``model.safetensors`` with
        transformers' names, the tied decoder left out as transformers does), written atomically."""
        config = copy.deepcopy(self.config)
        config.architectures = [self.ARCHITECTURE]
        config.dtype = self.embeddings.word.weight.dtype
        tensors = {bert_io.transformers_name(name): t for name, t in self.state_dict().items()}
        return bert_io.write_folder(folder, config, tensors)


class BertMLM(BertEncoder):
    """BERT encoder + MLM head (+ the pooler when ``with_pooler``); ``forward`` returns logits over the vocabulary.

    Saved as a ``BertForMaskedLM`` folder; a pooler is saved too (transformers' masked LM, which has none, skips it).
    """

    ARCHITECTURE = "BertForMaskedLM"
    FRESH = ("head.",)
    IGNORED = ("classifier.",)

    def __init__(self, config: BertConfig, *, with_pooler: bool = False, attention: str = "sdpa",
                 seed: int | None = None):
        super().__init__(config, attention=attention)
        self.head = MLMHead(config)
        self.pooler = Pooler(config) if with_pooler else None
        self.reset_weights(seed)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, *, positions: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, length, vocab) logits. With ``positions`` (flat indices into batch × length, e.g.
        ``(labels.flatten() != -100).nonzero().squeeze(1)``) only those hidden states go through the head, as in
        the original BERT: (len(positions), vocab), the same numbers at a fraction of the head's cost."""
        if positions is not None and (positions.dim() != 1 or positions.dtype not in (torch.int64, torch.int32)):
            raise ValueError(f"positions must be a 1-D integer tensor of flat indices into batch × length, not "
                             f"{positions.dtype} of shape {tuple(positions.shape)}: use "
                             "(labels.flatten() != -100).nonzero().squeeze(1)")
        hidden = self.last_hidden_state(input_ids, attention_mask, token_type_ids)
        if positions is not None:
            hidden = hidden.flatten(0, 1)[positions]
        return self.head(hidden, self.embeddings.word.weight)

    @classmethod
    def _fresh(cls, config: BertConfig, weights: dict[str, torch.Tensor], *, seed: int, attention: str) -> BertMLM:
        with_pooler = any(name.startswith("pooler.") for name in weights)
        return cls(config, with_pooler=with_pooler, attention=attention, seed=seed)

    @classmethod
    def load(cls, name_or_folder: str) -> BertMLM:
        """Ours, in eval mode, from a name :func:`mlm_course.models.resolve` understands (``"course"``,
        ``"minilm"``: its MLM head fresh, a folder)."""
        from mlm_course.models import resolve

        return cls.from_pretrained(resolve(name_or_folder))


class BertClassifier(BertEncoder):
    """BERT encoder + pooler + dropout + a linear layer: (batch, num_labels) logits from the [CLS] position, as
    transformers' ``BertForSequenceClassification`` (and saved as one)."""

    ARCHITECTURE = "BertForSequenceClassification"
    FRESH = ("pooler.", "classifier.")
    IGNORED = ("head.",)

    def __init__(self, config: BertConfig, *, num_labels: int | None = None, attention: str = "sdpa",
                 seed: int | None = None):
        num_labels = config.num_labels if num_labels is None else num_labels  # BertConfig's default: 2
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1, got {num_labels}")
        super().__init__(config, attention=attention)
        if self.config.num_labels != num_labels:
            self.config.num_labels = num_labels  # label names LABEL_0 … unless the config brought its own
        self.pooler = Pooler(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self.reset_weights(seed)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        pooled = self.pooler(self.last_hidden_state(input_ids, attention_mask, token_type_ids))
        return self.classifier(self.dropout(pooled))

    @classmethod
    def _fresh(cls, config: BertConfig, weights: dict[str, torch.Tensor], *, seed: int,
               attention: str) -> BertClassifier:
        return cls(config, attention=attention, seed=seed)


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
