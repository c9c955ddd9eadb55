"""`core.timeutil.to_micros`: the API's usual form read by datetime's C parser, every other RFC 3339
form by the pattern, the same instant either way (issue 24: an open operation's updated_at is
parsed per page)."""

from __future__ import annotations

import random
import time

import pytest

from exporter.core.timeutil import to_micros


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("2025-01-16T21:02:04Z", 1_737_061_324_000_000),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", -1_000_000),
        ("2024-02-29T23:59:59Z", 1_709_251_199_000_000),
        ("2025-01-16t21:02:04Z", 1_737_061_324_000_000),
        ("2025-01-16 21:02:04Z", 1_737_061_324_000_000),
        ("2025-01-16T21:02:04z", 1_737_061_324_000_000),
        ("2025-01-16T21:02:04.5Z", 1_737_061_324_500_000),
        ("2025-01-16T21:02:04.1234567Z", 1_737_061_324_123_456),
        ("2025-01-16T23:02:04+02:00", 1_737_061_324_000_000),
        ("2025-01-16T21:02:04", 1_737_061_324_000_000),
    ],
)
def test_rfc3339_forms_give_the_instant(text: str, micros: int) -> None:
    assert to_micros(text) == micros


@pytest.mark.parametrize(
    "text",
    [
        "20250116T210204.123Z",  # ISO 8601 basic format: datetime.fromisoformat reads it
        "2025-01-16T24:00:00Z",  # newer Pythons' fromisoformat: the next midnight
        "2025-13-16T21:02:04Z",
        "2025-02-30T21:02:04Z",
        "2025-01-16T21:02:60Z",
        "2025-01-16T21:02:0xZ",
        "2025-01-16X21:02:04Z",
    ],
)
def test_what_is_no_rfc3339_timestamp_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        to_micros(text)


def test_the_usual_form_is_exact_over_the_api_s_range() -> None:
    rng = random.Random(24)
    for _ in range(20_000):
        seconds = rng.randrange(0, 4_102_444_800)  # 1970 .. 2100
        text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
        assert to_micros(text) == seconds * 1_000_000, text
