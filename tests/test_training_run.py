"""The command line's runs on the lessons' loop with Accelerate: each command's settings reach the loop, checkpoints
are whole and replace each other, steps never wait for the device except when they log, compiled runs keep one
shape, bf16 learns what fp32 learns, and bad settings are refused clearly."""

import pytest
import torch
from accelerate.state import AcceleratorState

from mlm_course import finetune as ft
from mlm_course.bert import BertClassifier
from mlm_course.lab import finetune_run, pretrain_run
from mlm_course.lab.batch_order import cycle_batches
from mlm_course.lab.finetune_run import FinetuneConfig, fit
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
from mlm_course.lab.training_run import CHECKPOINT_POINTER, TrainingRun
from mlm_course.masking import MaskSpec
from mlm_course.train import InvalidSettings, TrainConfig

TINY_CLASSIFIER = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def blocks(bert_tok, sample_text):
    from mlm_course.pretraining import pack_blocks

    return pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)


def tiny_classifier(tok):
    from transformers import BertConfig

    torch.manual_seed(0)
    return BertClassifier(BertConfig(vocab_size=len(tok), max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                                     **TINY_CLASSIFIER), num_labels=2)


def toy_sentences(tok, n: int) -> ft.Encoded:
    """Sentences of 1–6 words: batches of them always carry padding."""
    g = torch.Generator().manual_seed(1)
    words = ["good", "great", "bad", "dull", "film", "plot"]
    texts = [" ".join(words[int(i)] for i in torch.randint(6, (int(torch.randint(1, 7, (1,), generator=g)),),
                                                            generator=g)) for _ in range(n)]
    return ft.encode(tok, texts, [len(t) % 2 for t in texts], max_length=16)


def test_both_commands_hand_their_loop_their_shared_settings():
    """Each command's configuration gives the loop's TrainConfig every field of the same name, its defaults being
    its own."""
    tuned = FinetuneConfig(lr=3e-5, warmup_steps=7, grad_accum=2, precision="fp32", seed=4, log_every=3)
    loop = tuned.train_config(batches_per_epoch=10, slots=2, keep_best=True)
    for name in ("lr", "warmup_steps", "grad_accum", "precision", "log_every", "betas", "eps"):
        assert getattr(loop, name) == getattr(tuned, name), name
    assert (loop.steps, loop.eval_every, loop.keep_best) == (10, 5, "accuracy")  # 2 epochs of 5 steps, each evaluated
    pre = PretrainConfig(lr=2e-3, max_grad_norm=0.5, steps=40, eval_every=7, warmup_steps=3).train_config()
    assert (pre.lr, pre.max_grad_norm, pre.steps, pre.eval_every, pre.warmup_steps) == (2e-3, 0.5, 40, 7, 3)
    assert pre.keep_best is None  # pretraining keeps its last weights
    recipe = ("lr", "warmup_ratio", "warmup_steps", "weight_decay", "betas", "eps", "max_grad_norm", "batch_size")
    for command, loop in ((PretrainConfig(), TrainConfig.pretraining()),
                          (FinetuneConfig(model="course"), TrainConfig.fine_tuning())):
        assert {name: getattr(command, name) for name in recipe} == {name: getattr(loop, name) for name in recipe}
    recipe = TrainConfig.pretraining()  # the schedule's length and the budget that stops the run part-way down it
    assert (PretrainConfig().steps, PretrainConfig().minutes) == (recipe.steps, recipe.minutes)


@pytest.mark.parametrize(("model", "lr"), [("course", 5e-4), ("random:tiny", 5e-4), ("random:small", 1e-4),
                                           ("random:base", 2e-5)])
def test_fine_tuning_takes_the_models_own_learning_rate_unless_told(model, lr):
    """One rule from the notebook to the command line (train.fine_tuning_lr): the wider the model, the smaller its
    step; --lr wins."""
    assert FinetuneConfig(model=model).lr == lr
    assert FinetuneConfig(model=model, lr=3e-5).lr == 3e-5


@pytest.mark.parametrize("bad", [{"steps": 0}, {"lr": 0.0}, {"batch_size": 0}, {"grad_accum": 0}, {"minutes": 0},
                                 {"steps": 0, "warmup_ratio": -0.1}, {"warmup_ratio": 2.0}, {"warmup_steps": -1},
                                 {"warmup_steps": 2.5}, {"precision": "fp64"}, {"max_grad_norm": 0.0},
                                 {"seed": 2**16}])
def test_invalid_config_is_a_clear_error(bad):
    with pytest.raises(InvalidSettings, match="invalid pretraining settings") as error:
        PretrainConfig(**bad)
    assert set(error.value.problems) == set(bad)  # each bad field named (the CLI shows it as its option)


def test_checkpoints_are_whole_and_replace_each_other(tiny_model, blocks, bert_tok, tmp_path):
    config = PretrainConfig(steps=5, batch_size=4, lr=1e-3, warmup_steps=1, eval_every=100, save_every=2,
                            device="cpu", precision="fp32")
    pretrain(tiny_model(), bert_tok, blocks, blocks[:2], config, out_dir=tmp_path)
    assert (tmp_path / CHECKPOINT_POINTER).read_text() == "checkpoint-5"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-5", CHECKPOINT_POINTER, "metrics.jsonl"]


def test_checkpoints_need_a_folder():
    with pytest.raises(ValueError, match="checkpoints need an output folder"):
        TrainingRun(None, save_every=10)


def test_cycle_batches_visits_every_example_once_per_epoch():
    pick = cycle_batches(10, 5, seed=3)
    first_epoch = torch.cat([pick(0), pick(1)])
    assert sorted(first_epoch.tolist()) == list(range(10))
    assert not torch.equal(torch.cat([pick(2), pick(3)]), first_epoch)  # a new permutation next epoch
    assert torch.equal(pick(1), cycle_batches(10, 5, seed=3)(1))
    assert sorted(torch.cat([pick(0, 0, 2), pick(0, 1, 2)]).tolist()) == list(range(10))  # two slots, one step


def test_cycle_batches_needs_enough_examples():
    with pytest.raises(ValueError, match="smaller batch"):
        cycle_batches(3, 8, seed=0)


# ---- no waiting for the device inside a step -------------------------------------------------------------------

#: Tensor operations that make the host wait for a GPU: reading a value, or a shape that depends on values.
SYNCING = {"item", "__float__", "__int__", "__bool__", "__index__", "tolist", "nonzero", "argwhere", "cpu", "numpy",
           "masked_select", "unique", "equal", "allclose"}


class SyncCounter(torch.overrides.TorchFunctionMode):
    """Counts, on any device, the calls that would wait for a GPU (boolean-mask indexing included)."""

    def __init__(self):
        super().__init__()
        self.calls, self.paused = [], False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.paused:
            return func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        bool_index = name in ("__getitem__", "__setitem__") and any(
            torch.is_tensor(a) and a.dtype is torch.bool for a in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        if name in SYNCING or bool_index:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def syncs_per_step(monkeypatch):
    """Count the calls that would wait for a GPU inside each step of a run (what runs between one step's end and
    the next's), not counting the building of the batches on the host."""
    counted, counter = [], SyncCounter()
    start, after_step = TrainingRun.start, TrainingRun.after_step

    def counting_start(self, *args):
        start(self, *args)
        counter.__enter__()

    def counting_after_step(self, step):
        counted.append((step, counter.calls))
        counter.calls = []
        stop = after_step(self, step)
        if stop or step == self.steps:
            counter.__exit__(None, None, None)
        return stop

    def paused(real):
        def batches(*args):
            iterator = real(*args)
            while True:
                counter.paused = True
                try:
                    batch = next(iterator)
                finally:
                    counter.paused = False
                yield batch
        return batches

    monkeypatch.setattr(TrainingRun, "start", counting_start)
    monkeypatch.setattr(TrainingRun, "after_step", counting_after_step)
    for module in (pretrain_run, finetune_run):
        monkeypatch.setattr(module, "step_batches", paused(module.step_batches))
    return counted


def test_counter_sees_the_waits_it_claims_to():
    x = torch.arange(6.0)
    with SyncCounter() as counter:
        float(x.sum()), x[x > 2], bool(x.all()), x.sum() * 2
    assert counter.calls == ["__float__", "__getitem__", "__bool__"]


def test_pretraining_steps_wait_for_the_device_only_when_logging(tiny_model, blocks, bert_tok, syncs_per_step,
                                                               tmp_path):
    config = PretrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, log_every=3, eval_every=100,
                            device="cpu", precision="fp32", mask_rate=0.3, save_every=100)
    pretrain(tiny_model(), bert_tok, blocks, blocks, config, out_dir=tmp_path)
    quiet = {step: calls for step, calls in syncs_per_step if step % 3}
    assert quiet == {1: [], 2: [], 4: [], 5: []}, "float(), .item() or a boolean selection inside the step"
    assert all(calls for step, calls in syncs_per_step if step % 3 == 0)  # logging reads the values: allowed


def test_fine_tuning_steps_with_padding_wait_only_when_logging(bert_tok, syncs_per_step):
    config = FinetuneConfig(epochs=1, batch_size=16, lr=1e-3, patience=None, log_every=3, device="cpu",
                            precision="fp32")
    fit(tiny_classifier(bert_tok), toy_sentences(bert_tok, 48), None, config, pad_token_id=0, progress=False,
        verbose=False)
    assert {step: calls for step, calls in syncs_per_step if step % 3} == {1: [], 2: []}


def test_compiled_shapes_padded_positions_give_the_same_loss(tiny_model, blocks, bert_tok):
    """With torch.compile the masked positions are padded to a multiple of 64 with an ignored position: the loss
    is the same, the count of shapes small."""
    from mlm_course.lab.pretrain_run import POSITION_BUCKET, pad_positions
    from mlm_course.objective import masked_lm_loss
    from mlm_course.pretraining import mask_blocks

    model = tiny_model().eval()
    batch = mask_blocks(blocks[:4], bert_tok, MaskSpec(mask_rate=0.3), torch.Generator().manual_seed(0))
    padded = pad_positions(batch, POSITION_BUCKET)
    assert len(padded["masked_positions"]) % POSITION_BUCKET == 0 < len(batch["masked_positions"])
    with torch.no_grad():
        torch.testing.assert_close(masked_lm_loss(model, padded), masked_lm_loss(model, batch))
        full = {k: v for k, v in batch.items() if k != "masked_positions"}
        torch.testing.assert_close(masked_lm_loss(model, full), masked_lm_loss(model, batch))


# ---- precision, seeds, schedule ------------------------------------------------------------------------------------


def test_bf16_pretraining_stays_within_005_nats_of_fp32(tiny_model, blocks, bert_tok):
    """bf16 autocast on the CPU (what auto picks where bf16 measures faster) learns what fp32 learns."""
    losses = {}
    for precision in ("fp32", "bf16"):
        config = PretrainConfig(steps=40, batch_size=4, lr=3e-3, warmup_steps=5, eval_every=100, device="cpu", seed=0,
                                precision=precision, mask_rate=0.3, dropout=0.0)
        result = pretrain(tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), bert_tok, blocks,
                          blocks, config, progress=False)
        losses[precision] = [m for m in result.history if m["split"] == "eval"][-1]["loss"]
        AcceleratorState._reset_state(True)  # accelerate holds one precision per process (see conftest.py)
    assert losses["fp32"] < 9.5, "the fp32 run should have learnt something (a uniform guess is ln 30522 = 10.3)"
    assert abs(losses["bf16"] - losses["fp32"]) < 0.05, losses


def test_weights_stored_in_bf16_are_trained_in_fp32(tiny_model, blocks, bert_tok):
    config = PretrainConfig(steps=1, batch_size=4, device="cpu", precision="fp32")
    done = pretrain(tiny_model().to(torch.bfloat16), bert_tok, blocks, None, config)
    assert all(p.dtype is torch.float32 for p in done.model.parameters())


def test_compiled_pretraining_sees_one_shape_of_masked_positions(tiny_model, blocks, bert_tok, monkeypatch):
    """torch.compile with static shapes (dynamic=False): the masked positions are padded to a multiple of 64, so
    every step has the same shapes and the model is traced once, where the raw counts (one per batch) would retrace
    it again and again. (The eager backend: what is counted is tracing, not code generation.)"""
    import torch._dynamo

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, **{**kw, "backend": "eager"}))
    graphs = {}
    for padded in (True, False):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        config = PretrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, eval_every=100, device="cpu",
                                precision="fp32", mask_rate=0.3, compile=True)
        if not padded:  # the same compiled run without the padding of the positions
            monkeypatch.setattr("mlm_course.lab.pretrain_run.POSITION_BUCKET", 1)
        pretrain(tiny_model(), bert_tok, blocks, blocks, config, progress=False)
        graphs[padded] = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    assert graphs[True] == 1 < graphs[False]


def test_compiled_fine_tuning_pads_batches_to_one_shape(bert_tok, monkeypatch):
    """Fine-tuning batches of 1-6 words, the last batch of an epoch short: with compile every batch is padded to a
    multiple of 32 tokens and to the full batch size (extra rows labelled -100), so one trace serves every step."""
    import torch._dynamo

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, **{**kw, "backend": "eager"}))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    config = FinetuneConfig(epochs=1, batch_size=16, lr=1e-3, patience=None, device="cpu", precision="fp32",
                            compile=True)
    fit(tiny_classifier(bert_tok), toy_sentences(bert_tok, 40), None, config, pad_token_id=0, progress=False,
        verbose=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()
