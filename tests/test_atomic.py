"""Atomic writes: a reader sees the old file (or folder) or the new one, never half of one, and a write that fails
leaves the old one and no temporary behind."""

import pytest

from mlm_course.atomic import write_file_atomic, write_folder_atomic


def test_a_file_is_replaced_whole(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    write_file_atomic(path, lambda temp: temp.write_text("new"))
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_failed_file_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")

    def half_then_crash(temp):
        temp.write_text("ne")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file_atomic(path, half_then_crash)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_folder_is_replaced_whole_and_its_old_files_go(tmp_path):
    folder = tmp_path / "best"
    folder.mkdir()
    (folder / "stale.txt").write_text("from the previous best")
    write_folder_atomic(folder, lambda temp: (temp / "model.safetensors").write_text("weights"))
    assert sorted(p.name for p in folder.iterdir()) == ["model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["best"]


def test_a_failed_folder_write_leaves_the_old_folder_and_no_temporary(tmp_path):
    folder = tmp_path / "best"
    folder.mkdir()
    (folder / "model.safetensors").write_text("old weights")

    def crash(temp):
        (temp / "model.safetensors").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_folder_atomic(folder, crash)
    assert (folder / "model.safetensors").read_text() == "old weights"
    assert [p.name for p in tmp_path.iterdir()] == ["best"]


def test_a_leftover_of_a_killed_replacement_does_not_block_the_next(tmp_path):
    folder = tmp_path / "best"
    (tmp_path / ".best-previous").mkdir()  # a run killed between the two renames left this
    write_folder_atomic(folder, lambda temp: (temp / "a").write_text("1"))
    assert (folder / "a").read_text() == "1" and not (tmp_path / ".best-previous").exists()


def test_the_key_file_goes_first_and_comes_last(tmp_path, monkeypatch):
    """A set of files with a key (a model folder's config.json): killed between the renames, the set has no key,
    so nothing loads a new weights file with an old config."""
    import os

    from mlm_course import atomic

    (tmp_path / "config.json").write_text("old config")
    (tmp_path / "model.safetensors").write_text("old weights")
    real, renamed = os.replace, []

    def dies_at_the_key(source, target):
        if str(target).endswith("config.json"):
            raise KeyboardInterrupt
        renamed.append(target)
        real(source, target)

    monkeypatch.setattr(atomic.os, "replace", dies_at_the_key)
    writes = {tmp_path / "config.json": lambda temp: temp.write_text("new config"),
              tmp_path / "model.safetensors": lambda temp: temp.write_text("new weights")}
    with pytest.raises(KeyboardInterrupt):
        atomic.write_files_atomic(writes, key=tmp_path / "config.json")
    assert renamed == [tmp_path / "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]  # no key, no temporaries
