"""Go duration strings ("1m30s", "250ms"), as the API writes durations."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Union

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([a-z\u00b5\u03bc]+)")

Seconds = Union[int, float, timedelta]


def to_nanoseconds(d: Seconds) -> int:
    """Return d (seconds, or a timedelta) in whole nanoseconds."""
    if isinstance(d, timedelta):
        return (d.days * 86_400 + d.seconds) * 1_000_000_000 + d.microseconds * 1_000
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise TypeError("a duration is a number of seconds or a timedelta, not %r" % (d,))
    return int(round(d * 1_000_000_000))


def format_duration(d: Seconds) -> str:
    """Format d (seconds, or a timedelta) as Go's time.Duration.String does."""
    ns = to_nanoseconds(d)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000_000_000:
        for unit, size in (("ns", 1), ("\u00b5s", 1_000), ("ms", 1_000_000)):
            if u < size * 1000:
                return sign + _fraction(u, size) + unit
    out = ""
    h, rest = divmod(u, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    if h:
        out += "%dh" % h
    if h or m:
        out += "%dm" % m
    return sign + out + _fraction(rest, 1_000_000_000) + "s"


def _fraction(v: int, size: int) -> str:
    whole, frac = divmod(v, size)
    if not frac:
        return str(whole)
    digits = len(str(size)) - 1
    return ("%d.%0*d" % (whole, digits, frac)).rstrip("0")


def parse_duration(s: str) -> float:
    """Parse a Go duration string into seconds."""
    text = s.strip()
    if text in ("0", "+0", "-0"):
        return 0.0
    sign = 1
    if text[:1] in "+-" and text:
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if not text:
        raise ValueError("invalid duration %r" % s)
    total = 0.0
    pos = 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.group(1) in ("", ".") or m.group(2) not in _UNITS:
            raise ValueError("invalid duration %r" % s)
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total / 1e9
