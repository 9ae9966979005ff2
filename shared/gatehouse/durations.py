"""Durations as operators write them: ``<n>s|m|h|d`` (``90s``, ``7d``), or bare milliseconds.

The one parser of every duration Gatehouse reads: each ``*_MS`` setting and the
retention settings (gatehouse.settings), and the per-type retention of job types.
"""

from __future__ import annotations

import re

UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_FORM = re.compile(r"(\d+)\s*(ms|s|m|h|d)?")


def parse_ms(value: object, *, bare_ms: bool = True) -> int:
    """``value`` in milliseconds: an int, or text ``<n>`` (ms) or ``<n><unit>`` (ms, s, m, h, d).

    With ``bare_ms=False`` a bare number other than 0 is refused: a retention of ``7``
    is much more likely meant as days than as 7 ms, so the unit must be written.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be a duration like 90s or 7d (got {value!r})")
    if isinstance(value, int):
        number, unit = value, None
    elif isinstance(value, str) and (match := _FORM.fullmatch(value.strip().lower())):
        number, unit = int(match[1]), match[2]
    else:
        raise ValueError(f"must be a duration like 90s, 15m, 2h or 7d (got {value!r})")
    if number < 0:
        raise ValueError(f"must not be negative (got {value!r})")
    if unit is None and not bare_ms and number != 0:
        raise ValueError(f"needs a unit: s, m, h or d, e.g. {number}d (got {value!r})")
    return number * UNIT_MS[unit or "ms"]
