"""Resolver filters, as TFX compiles them for the latest blessed model."""

from __future__ import annotations

import pytest

from rehearsal import filters

BLESSING = 'schema_title="tfx.ModelBlessing" AND state=LIVE AND metadata.blessed.number_value=1'


def _artifact(**kw):
    return {"schema_title": "tfx.ModelBlessing", "state": "LIVE", "name": "n", "uri": "u", "metadata": {}, **kw}


def test_the_blessing_query_matches_live_blessed_blessings_only():
    query = filters.parse(BLESSING)
    assert query.matches(_artifact(metadata={"blessed": 1.0}))
    assert not query.matches(_artifact(metadata={"blessed": 0.0}))
    assert not query.matches(_artifact(metadata={}))
    assert not query.matches(_artifact(metadata={"blessed": 1.0}, state="ABANDONED"))
    assert not query.matches(_artifact(metadata={"blessed": 1.0}, schema_title="tfx.Model"))


def test_quoted_values_may_hold_the_word_and():
    query = filters.parse('name="projects/p AND q/artifacts/7" AND schema_title="tfx.Model"')
    assert query.matches(_artifact(name="projects/p AND q/artifacts/7", schema_title="tfx.Model"))


def test_comparisons_and_context():
    query = filters.parse('in_context("other-pipeline") AND metadata.span.number_value>=2')
    assert query.context == "other-pipeline"
    assert query.matches(_artifact(metadata={"span": 3.0})) and not query.matches(_artifact(metadata={"span": 1.0}))
    assert not query.matches(_artifact(metadata={"span": "three"}))


@pytest.mark.parametrize(
    "text, message", [("owner=me", "unknown field 'owner'"), ("schema_title ~ x", "cannot parse the clause")]
)
def test_what_is_not_understood_is_refused_by_name(text, message):
    with pytest.raises(filters.FilterError, match=message):
        filters.parse(text)
