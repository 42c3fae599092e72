"""Where a notebook finds the course's stored results: beside it (or above the Chinese edition's folder), in the
benchmarks' results of this installation, a run's metrics log."""

import json
from pathlib import Path

import pytest

from mlm_course import stored

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def test_an_editable_install_reads_the_clones_notebooks():
    assert stored.notebooks_folder() == NOTEBOOKS


def test_a_benchmark_result_is_read_from_this_installation_and_none_when_never_measured(monkeypatch, tmp_path):
    measured = json.loads((ROOT / "benchmarks" / "results" / "bert_forward.json").read_text())
    assert stored.benchmark_result("bert_forward.json") == measured
    assert stored.benchmark_result("no_such_result.json") is None
    installed = tmp_path / "share" / "mlm_course"  # a wheel's layout: notebooks/ beside benchmarks/results/
    (installed / "benchmarks" / "results").mkdir(parents=True)
    (installed / "benchmarks" / "results" / "gpu_check.json").write_text('{"device": "H200"}')
    monkeypatch.setattr(stored, "notebooks_folder", lambda: installed / "notebooks")
    assert stored.benchmark_result("gpu_check.json") == {"device": "H200"}


def test_a_results_file_is_read_beside_the_notebook_or_above_the_chinese_editions_folder(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.json").write_text("{}")
    (tmp_path / "zh").mkdir()
    monkeypatch.chdir(tmp_path)
    assert stored.results_file("a.json") == Path("results") / "a.json"
    monkeypatch.chdir(tmp_path / "zh")
    assert stored.results_file("a.json") == Path("..") / "results" / "a.json"
    assert json.loads(stored.results_file("a.json").read_text()) == {}
    with pytest.raises(FileNotFoundError, match=r"results/b\.json or \.\./results/b\.json does not exist.*first cell"):
        stored.results_file("b.json")
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")  # only the zh/ folder looks one folder up
    with pytest.raises(FileNotFoundError, match=r"^results/a\.json does not exist"):
        stored.results_file("a.json")


def test_read_metrics_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        stored.read_metrics(tmp_path)
