"""Flink's and Beam's parts for a test, fetched quietly unless cached: the test is skipped
when a part cannot be fetched (no network, no Maven) and fails when one does not match its
checksum."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

Fetched = TypeVar("Fetched")


def fetched(fetch_part: Callable[..., Fetched], skip_reason: str) -> Fetched:
    """``fetch_part`` (one of ``flink_cluster.fetch``'s), or the test skipped with
    ``skip_reason`` and the error."""
    from flink_cluster import fetch

    try:
        return fetch_part(progress=lambda line: None)
    except fetch.ChecksumError:
        raise
    except (OSError, fetch.FetchError) as error:
        pytest.skip(f"{skip_reason}: {error}")
