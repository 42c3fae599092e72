"""On a GPU: the command line's loop (the lessons' train_with_accelerate) never waits for the device inside a step
except when it logs, at the GPU's own precision (bf16, or fp16 with loss scaling before compute capability 8.0) and
in fp32."""

import pytest
import torch

from mlm_course.lab.batch_order import step_batches
from mlm_course.lab.hardware import accelerator_for
from mlm_course.lab.pretrain_run import PretrainConfig, seeded_batches
from mlm_course.lab.training_run import TrainingRun
from mlm_course.objective import masked_lm_loss
from mlm_course.train import train_with_accelerate

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


class SyncGuard(TrainingRun):
    """Turns torch's CUDA sync detector to "error" for every step that does not log: any synchronising call in
    such a step (reading a value, a blocking copy) raises."""

    def start(self, accelerator, model, record, steps: int) -> None:
        super().start(accelerator, model, record, steps)
        torch.cuda.set_sync_debug_mode("error")  # step 1 does not log

    def after_step(self, step: int) -> bool:
        logging_next = (step + 1) % 3 == 0 or step + 1 == self.steps
        torch.cuda.set_sync_debug_mode(0 if logging_next else "error")
        return super().after_step(step)


def test_cuda_steps_never_synchronise_except_when_logging(tiny_model, blocks, bert_tok, gpu_precision):
    from accelerate.state import AcceleratorState

    for precision in (gpu_precision, "fp32"):
        AcceleratorState._reset_state(True)  # accelerate holds one precision per process
        config = PretrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, log_every=3, eval_every=100,
                                device="cuda", precision=precision, mask_rate=0.3, dropout=0.0)
        batches = step_batches(seeded_batches(blocks, bert_tok, config, slots=1), 1, config.seed)
        try:
            done = train_with_accelerate(tiny_model(), batches, masked_lm_loss, config.train_config(),
                                         accelerator=accelerator_for(precision, "cuda"), run=SyncGuard())
        finally:
            torch.cuda.set_sync_debug_mode(0)
        assert done.steps == 6 and [row["step"] for row in done.history] == [3, 6]
