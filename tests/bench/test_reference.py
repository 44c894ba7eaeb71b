"""The references' view of a problem's rows (bench/reference.py): what the boosted trees read."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

from bench import reference


def test_a_date_column_gives_the_boosted_trees_the_networks_numbers():
    cells = pd.Series(["2024-02-29 13:30", None, "not a date", "1969-12-31 00:00"])
    numbers = reference.date_numbers(cells, "%Y-%m-%d %H:%M")
    assert list(numbers) == ["days", "year", "month", "weekday", "hour"]
    leap = datetime.datetime(2024, 2, 29, 13, 30)
    expected_days = (leap - datetime.datetime(1970, 1, 1)) / datetime.timedelta(days=1)
    assert numbers["days"][0] == pytest.approx(expected_days) and numbers["days"][3] == pytest.approx(-1.0)
    assert (numbers["year"][0], numbers["month"][0], numbers["weekday"][0], numbers["hour"][0]) == (
        leap.year,
        leap.month,
        leap.weekday(),
        leap.hour,
    )
    assert all(np.isnan(numbers[part][1]) and np.isnan(numbers[part][2]) for part in numbers)
    assert list(reference.date_numbers(pd.Series(["2024-02-29"]), "%Y-%m-%d")) == ["days", "year", "month", "weekday"]
