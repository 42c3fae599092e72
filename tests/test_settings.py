import dataclasses

import pytest

from mlm_course.settings import QUICK_ENV_VAR, Settings


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_quick_values(value):
    assert Settings.from_env({QUICK_ENV_VAR: value}).quick


@pytest.mark.parametrize("value", ["", "0", "false", "off"])
def test_full_values(value):
    assert not Settings.from_env({QUICK_ENV_VAR: value}).quick


def test_unset_is_full():
    assert Settings.from_env({}) == Settings.full()


def test_bad_value_says_what_to_set():
    with pytest.raises(ValueError, match="set it to 1"):
        Settings.from_env({QUICK_ENV_VAR: "maybe"})


def test_quick_never_larger_than_full():
    full, quick = Settings.full(), Settings.quick_mode()
    for f in dataclasses.fields(Settings):
        a, b = getattr(quick, f.name), getattr(full, f.name)
        if isinstance(b, int) and not isinstance(b, bool):
            assert a is not None and a <= b, f.name
        elif b is None:  # None means "everything" in full mode
            assert a is None or a > 0, f.name


def test_describe_lists_every_size():
    text = Settings.quick_mode().describe()
    assert text.startswith("mode: quick")
    assert all(f.name in text for f in dataclasses.fields(Settings) if f.name != "quick")
