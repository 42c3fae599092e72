"""What every training command shares (``mlm-course pretrain`` and ``finetune``): :class:`OptimiserSettings`, the
options that become :class:`mlm_course.train.TrainConfig`'s fields of the same name, and the run's seed, device,
precision and compilation; each checked before any work, the bad ones named as their options.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlm_course.precision import device_problem
from mlm_course.train import TrainConfig, optimiser_problems

_RECIPE = TrainConfig()  # the loop's defaults are the commands' defaults: one value of each setting


@dataclass(kw_only=True)
class OptimiserSettings:
    """What every training command shares: batches, AdamW, the warm-up and linear decay, clipping, logging, seed,
    device, precision — with :class:`~mlm_course.train.TrainConfig`'s defaults, except the precision (``auto``: a
    command runs where it finds a GPU). Warm-up lasts ``warmup_steps`` optimiser steps when given, else
    ``warmup_ratio`` of the run."""

    batch_size: int = field(default=_RECIPE.batch_size, metadata={"help": "examples per micro-batch and process"})
    grad_accum: int = field(default=_RECIPE.grad_accum, metadata={"help": "micro-batches per optimiser step"})
    lr: float = field(default=_RECIPE.lr, metadata={"help": "peak learning rate (AdamW)"})
    warmup_ratio: float = field(default=_RECIPE.warmup_ratio,
                                metadata={"help": "warm-up as a fraction of the optimiser steps"})
    warmup_steps: int | None = field(default=_RECIPE.warmup_steps, metadata={
        "help": "warm-up as a number of optimiser steps (wins over --warmup-ratio)"})
    weight_decay: float = field(default=_RECIPE.weight_decay, metadata={
        "help": "AdamW's decoupled weight decay (not on biases and LayerNorms)"})
    betas: tuple[float, float] = field(default=_RECIPE.betas, metadata={"help": "AdamW's beta1,beta2"})
    eps: float = field(default=_RECIPE.eps, metadata={"help": "AdamW's epsilon"})
    max_grad_norm: float | None = field(default=_RECIPE.max_grad_norm,
                                        metadata={"help": "clip the gradient to this norm"})
    log_every: int = field(default=_RECIPE.log_every, metadata={"help": "a training row in metrics.jsonl every N steps"})
    seed: int = field(default=0, metadata={"help": "the seed every random draw of the run derives from"})
    device: str | None = field(default=None, metadata={"help": "cuda, cuda:N, mps or cpu (default: the best "
                                                                "available)"})
    precision: str = field(default="auto", metadata={"help": "auto, fp32, bf16 or fp16. auto: bf16 on GPUs of "
                                                             "compute capability ≥ 8.0, fp16 + loss scaling below; "
                                                             "on a CPU bf16 only where it measures faster"})
    compile: bool = field(default=False, metadata={"help": "torch.compile the model for training (static shapes)"})

    def problems(self, counts: tuple[str, ...] = ()) -> dict[str, str]:
        """Each bad field and what is wrong with it: ``counts`` (and the shared counts) must be ≥ 1 (or None)."""
        problems = {name: f"must be a whole number ≥ 1, not {getattr(self, name)!r}"
                    for name in ("batch_size", "grad_accum", "log_every", *counts)
                    if getattr(self, name) is not None
                    and not (type(getattr(self, name)) is int and getattr(self, name) >= 1)}
        problems |= optimiser_problems(self)
        if not (type(self.seed) is int and 0 <= self.seed < 2**16):
            problems["seed"] = f"must be a whole number in [0, 65535], not {self.seed!r}"
        device = None if self.device is None else device_problem(self.device)
        if device is not None:
            problems["device"] = device
        return problems
