"""The rehearsal's metadata store: names, newest-first queries, reusable executions."""

from __future__ import annotations

import pytest

from rehearsal import filters
from rehearsal.store import ArtifactStore, schema_title

MODEL = {"instanceSchema": "title: tfx.Model\ntype: object\n"}


@pytest.fixture
def store(tmp_path):
    found = ArtifactStore(str(tmp_path / "m.sqlite"), "proj", "here")
    yield found
    found.close()


def _model(store, pipeline="p", job="j"):
    return store.new_artifact(pipeline, job, "Trainer", "model", MODEL, lambda i: f"/root/Trainer_{i}/model")


def test_artifacts_get_vertex_style_names_and_their_uris(store):
    first, second = _model(store), _model(store)
    assert first["name"] == "projects/proj/locations/here/metadataStores/default/artifacts/1"
    assert second["uri"] == "/root/Trainer_2/model" and first["state"] == "PENDING"
    assert first["schema_title"] == schema_title(MODEL) == "tfx.Model"


def test_queries_see_live_artifacts_of_every_pipeline_newest_first_unless_a_context_is_named(store):
    a, b, _pending, other = _model(store), _model(store), _model(store), _model(store, pipeline="q")
    for artifact in (a, b, other):
        store.publish(artifact["name"], {"blessed": 1.0})
    query = filters.parse('schema_title="tfx.Model" AND state=LIVE')
    # Unscoped, as the widest reading of Vertex's: the other pipeline's newer model comes first.
    assert [x["name"] for x in store.query(query, limit=5)] == [other["name"], b["name"], a["name"]]
    assert [x["name"] for x in store.query(query, limit=1)] == [other["name"]]
    in_p = filters.parse('in_context("p") AND state=LIVE')
    assert [x["name"] for x in store.query(in_p, 5)] == [b["name"], a["name"]]
    assert store.query(filters.parse('in_context("q") AND state=LIVE'), 5)[0]["name"] == other["name"]
    assert store.artifact(b["name"])["metadata"] == {"blessed": 1.0}


def test_a_metadata_clause_picks_one_pipelines_artifacts(store):
    own, foreign = _model(store), _model(store, pipeline="q")
    store.publish(own["name"], {"blessed": 1.0, "pipeline_root": "gs://b/pipelines/p"})
    store.publish(foreign["name"], {"blessed": 1.0, "pipeline_root": "gs://b/pipelines/q"})
    query = filters.parse('state=LIVE AND metadata.pipeline_root.string_value="gs://b/pipelines/p"')
    assert [x["name"] for x in store.query(query, 5)] == [own["name"]]


def test_a_cache_hit_needs_a_succeeded_execution_whose_outputs_are_live(store):
    model = _model(store)
    execution = store.start_execution("p", "j", "Trainer")
    store.finish_execution(execution, "SUCCEEDED", "key", {"model": [{"name": model["name"]}]})
    assert store.cached_outputs("p", "key") is None  # its output is not LIVE yet
    store.publish(model["name"], {})
    assert store.cached_outputs("p", "key")["model"][0]["name"] == model["name"]
    assert store.cached_outputs("p", "other") is None and store.cached_outputs("q", "key") is None
    store.abandon([model["name"]])
    assert store.cached_outputs("p", "key") is None
