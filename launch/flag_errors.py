"""A flag value that cannot work (``SettingsError``, naming the flag as the user typed it and
the fix; the runners print it and exit with 2), and the checks several flag groups share."""

from __future__ import annotations

import argparse
from typing import Any


class SettingsError(ValueError):
    """A flag value that cannot work; the message names the flag and the fix."""


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
