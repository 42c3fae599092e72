"""A run's output folder: atomic writes, the metrics log, and a clear error for a folder that cannot be written."""

import json

import pytest

from mlm_course.lab import run_files
from mlm_course.stored import METRICS_FILE, read_metrics


def test_unwritable_output_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(PermissionError, match="choose another --out"):
        run_files.check_output_dir(blocker / "run")


def test_check_output_dir_creates_nested_folders_and_leaves_them_empty(tmp_path):
    out = run_files.check_output_dir(tmp_path / "a" / "b")
    assert out == tmp_path / "a" / "b" and out.is_dir() and list(out.iterdir()) == []


def test_write_json_atomic_leaves_no_temp_file(tmp_path):
    path = tmp_path / "x.json"
    run_files.write_json_atomic(path, {"a": 1})
    run_files.write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_failed_json_write_keeps_the_old_file_whole(tmp_path):
    path = tmp_path / "x.json"
    run_files.write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError, match="not JSON serializable"):
        run_files.write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_write_text_atomic_replaces_the_whole_file(tmp_path):
    path = tmp_path / "pointer.txt"
    run_files.write_text_atomic(path, "checkpoint-10")
    run_files.write_text_atomic(path, "checkpoint-2")
    assert path.read_text() == "checkpoint-2"
    assert [p.name for p in tmp_path.iterdir()] == ["pointer.txt"]


def test_metrics_log_round_trips_and_a_rewrite_drops_later_rows(tmp_path):
    rows = [{"step": 1, "split": "train", "loss": 2.5}, {"step": 2, "split": "eval", "loss": 2.25, "top1": 0.125}]
    for row in rows:
        run_files.append_metrics(tmp_path, row)
    assert (tmp_path / METRICS_FILE).read_text().count("\n") == 2  # one JSON object a line
    assert read_metrics(tmp_path) == rows
    run_files.rewrite_metrics(tmp_path, rows[:1])
    assert read_metrics(tmp_path) == rows[:1]
    run_files.rewrite_metrics(tmp_path, [])
    assert read_metrics(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [METRICS_FILE]
