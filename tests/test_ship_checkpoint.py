"""scripts/ship_checkpoint.py writes the model card from the settings a pretraining run records in results.json, and
swaps the shipped folder in atomically."""

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import ship_checkpoint  # noqa: E402

from mlm_course.lab.pretrain_run import PretrainConfig  # noqa: E402


def _settings(**values) -> dict:
    """A run's ``settings`` as results.json holds them (the run's PretrainConfig, flat), through JSON."""
    return json.loads(json.dumps(asdict(PretrainConfig(**values))))


def test_warmup_text_is_the_step_count_or_the_share_of_the_steps():
    assert ship_checkpoint.warmup_text(_settings(warmup_steps=500)) == "500"
    assert ship_checkpoint.warmup_text(_settings(warmup_steps=500, warmup_ratio=0.1)) == "500"  # the count wins
    assert ship_checkpoint.warmup_text(_settings(warmup_steps=0)) == "0"
    assert ship_checkpoint.warmup_text(_settings(warmup_ratio=0.1)) == "10% of the"


def test_stage_lines_read_the_settings_a_run_records():
    """The card reads a run's settings under the names results.json records them (PretrainConfig's fields)."""
    settings = _settings(init_from="course", stack_to=4, short_seq_prob=0.1, seq_len=32, batch_size=8, lr=1e-3,
                         warmup_steps=2)
    results = {"steps": 4, "tokens_seen": 4 * 8 * 32, "seconds": 120.0, "heldout": {"loss": 5.25}, "settings": settings}
    stage = ship_checkpoint.stage(results, "mlm-course pretrain …")
    assert stage == {"command": "mlm-course pretrain …", **results}
    assert ship_checkpoint._stage_line(2, stage) == (
        "- Stage 2, from the weights of stage 1, stacked to 4 layers (layer i a copy of layer i mod the old depth); "
        "10% of the sequences cut to a random shorter length: 4 steps × batch 8 × 32 tokens = 1,024 tokens, peak "
        "learning rate 0.001, 2 warm-up steps, 2 min; held-out loss after it 5.250.\n")
    first = {**results, "tokens_seen": 4 * 32 * 128, "settings": _settings(size="tiny", lr=1e-3, warmup_ratio=0.05)}
    assert ship_checkpoint._stage_line(1, ship_checkpoint.stage(first, "")).startswith(
        "- Stage 1, from random weights: 4 steps × batch 32 × 128 tokens = 16,384 tokens, peak learning rate 0.001, "
        "5% of the warm-up steps")


def test_joined_metrics_continue_the_later_stage_after_the_earlier(tmp_path):
    from mlm_course.lab.run_files import append_metrics

    earlier, later = tmp_path / "a", tmp_path / "b"
    for folder, rows in ((earlier, [{"step": 10, "seconds": 5.0, "loss": 7.0}]),
                         (later, [{"step": 4, "seconds": 1.5, "loss": 6.0}, {"step": 8, "loss": 5.0}])):
        folder.mkdir()
        for row in rows:
            append_metrics(folder, row)
    joined = [json.loads(line) for line in ship_checkpoint.joined_metrics(earlier, later, 10, 5.0, 2).splitlines()]
    assert joined == [{"stage": 1, "step": 10, "seconds": 5.0, "loss": 7.0},
                      {"step": 14, "seconds": 6.5, "loss": 6.0, "stage": 2},
                      {"step": 18, "loss": 5.0, "seconds": 5.0, "stage": 2}]


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for name in ship_checkpoint.FILES:
        (run / name).write_text("{}")
    return run


@pytest.mark.parametrize("fails", [False, True])
def test_the_checkpoint_folder_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch, fails):
    """The shipped folder is swapped in by mlm_course.atomic.write_folder_atomic: a write that fails half-way leaves
    the old checkpoint and no temporary folder; one that succeeds leaves only the new files."""
    assets = tmp_path / "data"
    (assets / "course-bert").mkdir(parents=True)
    (assets / "course-bert" / "old.txt").write_text("old")
    monkeypatch.setattr(ship_checkpoint.corpus, "asset_dir", lambda: assets)

    def write_checkpoint(folder, args):
        (folder / "config.json").write_text("{}")
        if fails:
            raise RuntimeError("killed half-way")
        return {"probes": {"hits": 3, "sentences": 4}}

    monkeypatch.setattr(ship_checkpoint, "write_checkpoint", write_checkpoint)
    monkeypatch.setattr(sys, "argv", ["ship_checkpoint.py", str(_run_folder(tmp_path))])
    if fails:
        with pytest.raises(RuntimeError):
            ship_checkpoint.main()
        assert sorted(p.name for p in assets.iterdir()) == ["course-bert"]
        assert sorted(p.name for p in (assets / "course-bert").iterdir()) == ["old.txt"]
    else:
        assert ship_checkpoint.main() == 0
        assert sorted(p.name for p in assets.iterdir()) == ["course-bert"]
        assert sorted(p.name for p in (assets / "course-bert").iterdir()) == ["config.json"]
