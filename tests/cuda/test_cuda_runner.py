"""On a GPU: the training loop's steps never wait for the device except when they log, at the GPU's own precision
(bf16, or fp16 with loss scaling before compute capability 8.0) and in fp32."""

import pytest
import torch

from mlm_course.lab import runner
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_cuda_steps_never_synchronise_except_when_logging(tiny_model, blocks, bert_tok, monkeypatch, gpu_precision):
    """On a GPU, torch's own sync detector: any synchronising call (non-blocking copies included) raises."""
    original = runner.TrainLoop.run_step

    def run_step(self):
        logging = (self.step + 1) % self.config.log_every == 0 or self.step + 1 == self.config.steps
        torch.cuda.set_sync_debug_mode(0 if logging else "error")
        try:
            original(self)
        finally:
            torch.cuda.set_sync_debug_mode(0)

    monkeypatch.setattr(runner.TrainLoop, "run_step", run_step)
    for precision in (gpu_precision, "fp32"):
        config = PretrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, log_every=3, eval_every=100,
                                device="cuda", precision=precision, mask_rate=0.3)
        pretrain(tiny_model(), bert_tok, blocks, blocks, config, progress=False)
