"""A flag value that cannot work, and the checks several flag groups share.

Every module that owns flags checks them before anything is compiled or sent and raises
``SettingsError`` naming the flag and the fix; the runner prints it and exits with 2.
Imports nothing of the project, so any module may raise it.
"""

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
