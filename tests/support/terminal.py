"""What library output looks like on a terminal, to prove a command's default output holds none."""

from __future__ import annotations

import re

# TensorFlow's C++ logs ("2026-11-27 20:31:43.389471: E external/..." and "E0000 00:00:..."),
# absl's Python format ("I1127 20:32:01.467909 1403... file.py:105] ..."), Python warnings
# ("path.py:273: FutureWarning: ..." and the source line under it), logging's default
# format ("WARNING:root:..."), absl's "WARNING: Logging before flag parsing", Keras' epoch lines.
LIBRARY_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] "
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d"
    r"|.*\.py:\d+: \w*Warning: "
    r"|\s+warnings\.warn\("
    r"|(DEBUG|INFO|WARNING|ERROR|CRITICAL):"
    r"|Epoch \d+/\d+$|\d+/\d+ - \d+m?s - "
    r"|Traceback \(most recent call last\))"
)


def library_lines(text: str) -> list[str]:
    """The lines of ``text`` that a library wrote, by their look."""
    return [line for line in text.splitlines() if LIBRARY_LINE.match(line)]
