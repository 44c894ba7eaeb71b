"""A setting that cannot work: ``FieldError`` names the configuration's field, ``SettingsError``
the flag as the user typed it (``launch.flags`` turns one into the other); the runners print
it and exit with 2. Imports nothing of the project, so any module may raise them.
"""

from __future__ import annotations

import argparse
from typing import Any


class SettingsError(ValueError):
    """A flag value that cannot work; the message names the flag and the fix."""


class FieldError(ValueError):
    """A configuration value that cannot work: ``field`` names it, ``problem`` says why and the fix."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


def require_gcs(flag: str, value: str | None) -> None:
    """Paths the cloud reads must be on Cloud Storage: it cannot read this machine's disk."""
    if not value or not value.startswith("gs://"):
        raise SettingsError(f"{flag} must be a gs:// path (the cloud cannot read this machine's disk); got {value!r}")


def require(flag: str, value: str | None, why: str) -> None:
    """A flag another flag cannot do without."""
    if not value:
        raise SettingsError(f"{flag} is required {why}")


def flag_value(args: argparse.Namespace, flag: str) -> Any:
    """The value of ``--some-flag``, so a check can name the flag it reads."""
    return getattr(args, flag[2:].replace("-", "_"))
