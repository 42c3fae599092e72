"""``mlm-course notebooks DEST``: the notebooks and their results files copied to a learner's folder; a bad DEST or
an edited copy refused with one sentence before anything is written. Here from the clone (editable install);
tests/test_fresh_install.py copies them out of an installed wheel."""

from pathlib import Path

import pytest

import mlm_course
from mlm_course.lab import cli, course_files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_course_files_are_the_notebooks_and_the_results_they_read():
    files = [str(name) for name in course_files.course_files(NOTEBOOKS)]
    notebooks = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    results = sorted(f"results/{p.name}" for p in (NOTEBOOKS / "results").glob("*.json"))
    chinese = sorted(f"zh/{p.name}" for p in (NOTEBOOKS / "zh").glob("*") if p.suffix in (".ipynb", ".md"))
    assert sorted(files) == sorted(notebooks + results + chinese) and len(notebooks) >= 9 and results
    assert "zh/GLOSSARY.md" in chinese  # the Chinese edition's terms travel with it
    assert not any(name.startswith("runs") for name in files)  # a learner's own runs are not course files


def test_copy_writes_every_file_then_nothing_when_the_copies_are_unchanged(tmp_path, capsys):
    dest = tmp_path / "course"
    assert cli.main(["notebooks", str(dest)]) == 0
    expected = {str(name): (NOTEBOOKS / name).read_bytes() for name in course_files.course_files(NOTEBOOKS)}
    assert _tree(dest) == expected
    assert f"{len(expected)} files written to {dest}" in capsys.readouterr().out
    assert course_files.copy_notebooks(dest) == []


def test_an_edited_copy_is_refused_before_anything_is_written_and_overwritten_with_force(tmp_path, capsys):
    dest = tmp_path / "course"
    course_files.copy_notebooks(dest)
    (dest / "02_tokens.ipynb").write_text("my notes")
    (dest / "01_why_log.ipynb").unlink()  # missing: would be written, but the refusal comes first
    before = _tree(dest)
    assert cli.main(["notebooks", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "already holds edited copies of 02_tokens.ipynb: copy to another folder, or pass --force" in err
    assert err.count("\n") == 1 and _tree(dest) == before
    assert course_files.copy_notebooks(dest, force=True) == [Path("01_why_log.ipynb"), Path("02_tokens.ipynb")]
    assert (dest / "02_tokens.ipynb").read_bytes() == (NOTEBOOKS / "02_tokens.ipynb").read_bytes()


def test_many_edited_copies_are_counted_in_the_sentence(tmp_path):
    course_files.copy_notebooks(tmp_path)
    for path in sorted(tmp_path.glob("0*.ipynb"))[:5]:
        path.write_text("{}")
    with pytest.raises(ValueError, match=r"copies of 01_why_log.ipynb, 02_tokens.ipynb, 03_masking.ipynb and 2 more:"):
        course_files.copy_notebooks(tmp_path)


@pytest.mark.parametrize("inside", ["package", "notebooks"])
def test_a_destination_inside_the_installed_course_is_refused(tmp_path, inside):
    folder = Path(mlm_course.__file__).parent if inside == "package" else NOTEBOOKS
    dest = folder / "copy"
    with pytest.raises(ValueError, match=r"is inside the installed course .*: copy the notebooks to a folder of your own"):
        course_files.copy_notebooks(dest)
    assert not dest.exists()


def test_a_destination_under_a_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="notes.txt is a file, not a folder"):
        course_files.copy_notebooks(tmp_path / "notes.txt" / "course")


def test_an_unwritable_destination_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """Root may write anywhere, so the permission check is shown with os.access answering as for a read-only folder."""
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(course_files.os, "access", lambda path, mode: Path(path) != locked)
    with pytest.raises(PermissionError, match=r"cannot write to .*locked: choose a folder you can write to"):
        course_files.copy_notebooks(locked / "course")
    assert list(locked.iterdir()) == []


def test_copy_results_adds_only_missing_results_files(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ablations_cpu.json").write_text("mine")
    written = course_files.copy_results(tmp_path)
    shipped = sorted(p.name for p in (NOTEBOOKS / "results").glob("*.json"))
    assert sorted(p.name for p in written) == [name for name in shipped if name != "ablations_cpu.json"]
    assert (tmp_path / "results" / "ablations_cpu.json").read_text() == "mine"
    assert course_files.copy_results(tmp_path) == []
