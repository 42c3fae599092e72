"""scripts/ship_checkpoint.py writes the model card from recorded training configs, old and new."""

import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import ship_checkpoint  # noqa: E402

from mlm_course.lab.runner import TrainConfig  # noqa: E402


def test_warmup_text_reads_configs_recorded_before_and_after_the_rename():
    """A run trained after `warmup` became `warmup_ratio` / `warmup_steps` made the card raise KeyError."""
    assert ship_checkpoint.warmup_text({"warmup": 700.0}) == "700"  # the shipped checkpoint's stages
    assert ship_checkpoint.warmup_text({"warmup": 0.05}) == "5% of the"
    assert ship_checkpoint.warmup_text(asdict(TrainConfig(warmup_steps=500))) == "500"
    assert ship_checkpoint.warmup_text(asdict(TrainConfig(warmup_ratio=0.1))) == "10% of the"


def test_joined_metrics_continue_the_later_stage_after_the_earlier(tmp_path):
    import json

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
