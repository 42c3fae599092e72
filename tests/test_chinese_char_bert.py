"""scripts/chinese_char_bert.py's command line: a timing run of fewer than one step is refused, never trained."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import chinese_char_bert  # noqa: E402


def _never(*args, **kwargs):
    raise AssertionError("nothing may be trained or shipped")


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_a_timing_run_of_fewer_than_one_step_is_refused_before_any_training(steps, monkeypatch, capsys):
    monkeypatch.setattr(chinese_char_bert, "train", _never)
    monkeypatch.setattr(chinese_char_bert, "train_and_ship", _never)
    with pytest.raises(SystemExit) as exit_info:
        chinese_char_bert.main(["--steps", steps])
    assert exit_info.value.code == 2
    assert f"--steps {steps}: a timing run needs at least 1 step" in capsys.readouterr().err
