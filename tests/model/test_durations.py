"""Kubernetes-style durations as ModuleSet authors write them."""

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interlock.model.durations import InvalidDuration, duration_seconds, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("1m", timedelta(minutes=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("500ms", timedelta(milliseconds=500)),
        ("1.5s", timedelta(milliseconds=1500)),
        (".5s", timedelta(milliseconds=500)),
        ("2h45m10s", timedelta(hours=2, minutes=45, seconds=10)),
        ("250us", timedelta(microseconds=250)),
        ("250µs", timedelta(microseconds=250)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
    ],
)
def test_valid_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "10", "s", "10x", "-5s", "+5s", "1m 30s", "1.2.3s", "10S", "1d", "99999999999h"]
)
def test_invalid_durations_quote_the_input(text: str) -> None:
    with pytest.raises(InvalidDuration) as err:
        parse_duration(text)
    assert f'"{text}"' in str(err.value)


def test_duration_seconds() -> None:
    assert duration_seconds("1m30s") == 90.0


@given(hours=st.integers(0, 1000), minutes=st.integers(0, 59), seconds=st.integers(0, 59))
def test_composed_units_add_up(hours: int, minutes: int, seconds: int) -> None:
    text = f"{hours}h{minutes}m{seconds}s"
    assert parse_duration(text) == timedelta(hours=hours, minutes=minutes, seconds=seconds)
