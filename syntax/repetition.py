"""Suggestions that repeat a piece of themselves over and over: found, so that they are cut or never shown.

A small model that has lost the thread keeps emitting the same few tokens (`- other._x - other._x - other._x`,
`0, 0, 0, 0, 0, 0`, a line written five times). Such text is never what the user wanted, and showing it is what
makes people switch a completion tool off. Two shapes are caught:

- within a line, a unit of at least `MIN_UNIT` characters repeated back to back at least `MIN_REPEATS` times, the
  repeated run covering at least `MIN_RUN` characters (so `[0, 0]` or `==` stay, `0, 0, 0, 0, 0, 0, 0` goes);
- across lines, the same non-blank line (after stripping) three or more times in a row, or a block of lines
  repeated back to back.

`loop_start(text)` is where the first repetition begins (None when there is none): the caller keeps what comes
before it if that is still worth showing, else shows nothing.
"""

from __future__ import annotations

import re

MIN_UNIT = 1
MIN_REPEATS = 3  # times a unit of MIN_LONG_UNIT characters or more must appear back to back
MIN_REPEATS_SHORT = 5  # for units shorter than MIN_LONG_UNIT (a digit, `0, `, `ab`)
MIN_LONG_UNIT = 4
MIN_RUN = 12  # characters the repeated run must cover at least
MAX_UNIT = 40
REPEATED_LINES = 3
MIN_LINE = 6  # a line shorter than this (stripped) may repeat: `end`, `}`, `pass`, `break`

# A unit (lazy, 1..MAX_UNIT characters) followed by itself at least twice more; the counts are checked after.
_RUN = re.compile(r"(.{" + f"{MIN_UNIT},{MAX_UNIT}" + r"}?)\1{2,}")


def line_loop_start(line: str) -> int | None:
    """Offset in `line` where a repeated run starts, or None."""
    for m in _RUN.finditer(line):
        unit = m.group(1)
        if not unit.strip():
            continue  # runs of blanks are indentation or alignment
        # The smallest period of the unit decides: "abab" repeated is "ab" repeated.
        period = _smallest_period(unit)
        if len(period) == 1 and not period.isalnum():
            continue  # a rule of one punctuation character: `# -------`, `"=" * 40` written out
        repeats = len(m.group(0)) // len(period)
        need = MIN_REPEATS if len(period) >= MIN_LONG_UNIT else MIN_REPEATS_SHORT
        if repeats >= need and len(m.group(0)) >= MIN_RUN:
            return m.start()
    return None


def _smallest_period(s: str) -> str:
    for k in range(1, len(s) + 1):
        if len(s) % k == 0 and s[:k] * (len(s) // k) == s:
            return s[:k]
    return s


def loop_start(text: str) -> int | None:
    """Offset in `text` where the suggestion starts repeating itself, or None when it does not."""
    offset = 0
    lines = text.split("\n")
    starts = []
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    within = None  # the first line that repeats a piece of itself
    for i, line in enumerate(lines):
        at = line_loop_start(line)
        if at is not None:
            within = starts[i] + at
            break
    # Lines repeated may begin earlier than a repeat within a later line (`# GH#1\n# GH#1\n# GH#1\n# GH#1111111`):
    # the earliest of the two is where the loop starts.
    stripped = [line.strip() for line in lines]
    for i in range(len(lines)):
        if within is not None and starts[i] >= within:
            break
        if len(stripped[i]) < MIN_LINE or not re.search(r"\w", stripped[i]):
            continue  # closers (`}`, `)`, `end`) and short lines legitimately repeat
        if i + REPEATED_LINES <= len(lines) and len(set(stripped[i : i + REPEATED_LINES])) == 1:
            return min(starts[i + 1], within if within is not None else len(text))  # the first copy may be right
        for size in range(2, (len(lines) - i) // 2 + 1):  # a block of `size` lines written twice in a row
            block = stripped[i : i + size]
            if any(block) and block == stripped[i + size : i + 2 * size] and sum(map(bool, block)) >= 2:
                return min(starts[i + size], within if within is not None else len(text))
    return within


def is_loop(text: str) -> bool:
    return loop_start(text) is not None
