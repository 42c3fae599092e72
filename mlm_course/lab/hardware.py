"""What the runner adds around the lessons' training step: a device, a precision, several processes.

:class:`Hardware` holds what :func:`mlm_course.steps.training_step` is handed by the runner (the step itself is never
copied): the autocast dtype :mod:`~mlm_course.precision` chose, fp16's loss scaler (a step whose gradients
overflowed is skipped: its gradient norm is not finite, which the runner counts without waiting for the device),
the step's target tokens summed over the processes, and ``micro_batch``: each micro-batch's dropout drawn from its
own seed (so a resumed run draws what an uninterrupted one draws, and each process draws its own); with several
processes, gradients are averaged across them only after the last micro-batch of the step (DDP's ``no_sync``).

:class:`Processes` is what ``accelerate launch`` (or ``torchrun``) started: accelerate's ``PartialState`` reads the
launcher's environment and joins the process group; one process without a launcher. :class:`Prefetcher` builds the
next step's batches on the host while the device computes the current one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

from mlm_course.lab.seeds import seed_for
from mlm_course.precision import pick_device
from mlm_course.train import mixed_precision

Batch = dict[str, torch.Tensor]


def accelerator_for(precision: str, device: str | None = None, *, compile: bool = False):
    """The Accelerator of a run in ``precision`` (auto, fp32, bf16, fp16: :func:`mlm_course.train.mixed_precision`)
    on ``device`` (default: the best available; under a launcher, each process's own), compiled with
    ``torch.compile`` (static shapes) when asked. Accelerate holds one precision and device per process: a second
    run that asks for another in the same process (a notebook kernel) is refused with what to do."""
    from accelerate import Accelerator
    from accelerate.utils import TorchDynamoPlugin

    place = pick_device(device)
    mixed = mixed_precision(precision, place)
    dynamo = TorchDynamoPlugin(backend="inductor", dynamic=False) if compile else None
    try:
        return Accelerator(mixed_precision=mixed, cpu=place.type == "cpu", dynamo_plugin=dynamo)
    except ValueError as exc:
        if "already been initialized" not in str(exc):
            raise
        from accelerate.state import AcceleratorState

        state = AcceleratorState()
        raise ValueError(f"this Python process already trains with Accelerate in {state.mixed_precision} on "
                         f"{state.device}, and Accelerate keeps one precision and device per process: run this with "
                         f"precision and device that match, or in a new process (restart the notebook's kernel)"
                         ) from exc


class Processes:
    """The processes of this run: one, or those a launcher started (each with its own share of the batches)."""

    def __init__(self):
        from accelerate import PartialState

        self.state = PartialState(cpu=not torch.cuda.is_available())  # no GPU: processes join over gloo
        self.count = self.state.num_processes
        self.index = self.state.process_index
        self.is_main = self.state.is_main_process

    def wait(self) -> None:
        self.state.wait_for_everyone()

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """The sum of ``values`` over the processes (the values themselves with one process)."""
        if self.count == 1:
            return values
        values = values.clone()
        torch.distributed.all_reduce(values)
        return values

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The mean of ``values`` over the processes (the values themselves with one process)."""
        return self.sum(values) / self.count

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``model`` itself with one process; DDP (gradients averaged across processes in backward) with several."""
        if self.count == 1:
            return model
        ids = [device.index] if device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


class Hardware:
    """The hooks of :func:`mlm_course.steps.training_step` for ``device``, autocast ``dtype`` (None: fp32) and
    ``processes``. Set :attr:`step` before each step: it seeds the micro-batches' dropout."""

    def __init__(self, device: torch.device, dtype: torch.dtype | None, processes: Processes, *, seed: int,
                 grad_accum: int):
        self.device = device
        self.dtype = dtype
        self.processes = processes
        self.seed = seed
        self.grad_accum = grad_accum
        self.scaler = torch.amp.GradScaler(device.type) if dtype is torch.float16 else None
        self.step = 0

    def slot(self, index: int) -> int:
        """Micro-batch ``index`` of this process, numbered over all processes."""
        return self.processes.index * self.grad_accum + index

    def micro_batch(self, model: torch.nn.Module, index: int, count: int):
        torch.manual_seed(seed_for(self.seed, "dropout", self.step, self.slot(index)))
        last = index == count - 1
        return contextlib.nullcontext() if last or self.processes.count == 1 else model.no_sync()

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def count(self, targets: torch.Tensor) -> torch.Tensor:
        """The target tokens of one step summed over every process (``targets`` itself with one process)."""
        return targets if self.processes.count == 1 else self.processes.sum(targets.to(self.device))


class Prefetcher:
    """``make(step)`` for the next step built in a background thread while the current step runs.

    ``make`` must depend on the step number only (it does: every draw is seeded by the step), so prefetching never
    changes what a run trains on. On CUDA the batches are pinned in the thread, so the copy to the GPU does not
    wait. ``enabled=False`` builds each step's batches when asked, in the calling thread.
    """

    def __init__(self, make: Callable[[int], list[Batch]], *, pin: bool, enabled: bool = True):
        self.make = make
        self.pin = pin
        self.enabled = enabled
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch") if enabled else None
        self.pending: dict[int, object] = {}

    def _build(self, step: int) -> list[Batch]:
        batches = self.make(step)
        if self.pin:
            batches = [{key: value.pin_memory() for key, value in batch.items()} for batch in batches]
        return batches

    def get(self, step: int, *, next_step: int | None = None) -> list[Batch]:
        """The batches of ``step``; starts building ``next_step``'s in the background."""
        if self.pool is None:
            return self._build(step)
        future = self.pending.pop(step, None) or self.pool.submit(self._build, step)
        if next_step is not None and next_step not in self.pending:
            self.pending[next_step] = self.pool.submit(self._build, next_step)
        return future.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pending.clear()
