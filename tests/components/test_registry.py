"""The pipeline's registry model on Vertex AI (components/registry.py), driven through the
real ``google-cloud-aiplatform`` client against the rehearsal's stand-ins (a model server in
TensorFlow 2.15 per deployment): pushes become versions of one model, aliases follow the
champion, a canary shares the traffic, promote and rollback move it, and each refusal
says why. The predictions' ``model_version_id`` shows which version answered."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from components import registry
from tests.support import tiny_model
from tests.support.vertex_standin import vertex_behind_proxy

PROJECT, REGION, ENDPOINT = "my-proj", "us-central1", "penguins-endpoint"
ROOT = "gs://bucket/out/pipelines/penguins"
MODEL_URIS = [f"gs://bucket/pushed/{n}" for n in (1, 2, 3)]

# Every step in one client process (the proxy's environment, anonymous credentials: the
# OAuth stand-in is not this test's); each step's changes or refusal, the versions after it,
# and which versions answered 40 predictions.
SCRIPT = """
import collections, json, sys
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform
from components import registry

given = json.loads(sys.argv[1])
aiplatform.init(project=given["project"], location=given["region"], credentials=AnonymousCredentials())
model = registry.RegistryModel.of_pipeline(given["project"], given["region"], "penguins", given["root"])
endpoint_name = given["endpoint"]
steps = []


def answered():
    (endpoint,) = aiplatform.Endpoint.list(filter=f'display_name="{endpoint_name}"')
    versions = [endpoint.predict(instances=given["instances"]).model_version_id for _ in range(40)]
    return dict(collections.Counter(versions))


def step(name, action, predict=True):
    record = {"name": name}
    try:
        record["changes"] = action()
    except registry.ReleaseError as err:
        record["refused"] = str(err)
    try:
        record["versions"] = [
            [v.version_id, list(v.aliases), v.traffic, v.labels, v.description]
            for v in registry.describe(model, endpoint_name)
        ]
    except registry.ReleaseError as err:
        record["versions"] = str(err)
    if predict and "changes" in record:
        record["answered"] = answered()
    steps.append(record)


def push(uri, percent, run):
    pushed = registry.Push(uri, given["image"], {"run": run, "metric": "accuracy"}, f"accuracy 0.97; run {run}")
    uploaded, changes, _ = registry.push(model, pushed, registry.Deployment(endpoint_name, "n1-standard-2", percent))
    name = registry.import_evaluation(uploaded, "multiclass", {"accuracy": 0.97, "auc": 0.99}, run, {"run": run})
    return changes + [f"evaluation {name}"]


step("promote-before-any-push", lambda: registry.promote(model, endpoint_name))
step("push-1", lambda: push(given["uris"][0], 30, "Job-1"))
step("push-2-canary", lambda: push(given["uris"][1], 30, "job-2"))
step("promote", lambda: registry.promote(model, endpoint_name))
step("promote-again", lambda: registry.promote(model, endpoint_name), predict=False)
step("rollback-after-promotion", lambda: registry.rollback(model, endpoint_name))
step("rollback-again", lambda: registry.rollback(model, endpoint_name), predict=False)
step("push-3-canary", lambda: push(given["uris"][2], 50, "job-3"))
step("rollback-canary", lambda: registry.rollback(model, endpoint_name))
step("rollback-unknown-endpoint", lambda: registry.rollback(model, "no-such-endpoint"), predict=False)
step("push-4-canary", lambda: push(given["uris"][0], 20, "job-4"), predict=False)
step("push-5-in-full", lambda: push(given["uris"][1], 0, "job-5"))
only = registry.RegistryModel.of_pipeline(given["project"], given["region"], "registered", given["root"] + "-2")
registered = [
    registry.push(only, registry.Push(uri, given["image"], {"run": run}, run))[1]
    for uri, run in zip(given["uris"][:2], ("r1", "r2"))
]
registered_versions = [[v.version_id, list(v.aliases), v.traffic] for v in registry.describe(only, None)]
listed = aiplatform.Model.list(filter=model.list_filter)
evaluations = {
    v: [e.metrics for e in aiplatform.Model(listed[0].resource_name, version=v).list_model_evaluations()]
    for v in ("1", "2", "3")
}
print(json.dumps({
    "steps": steps,
    "models": [m.resource_name for m in listed],
    "display_name": listed[0].display_name,
    "evaluations": {v: [dict(m) for m in found] for v, found in evaluations.items()},
    "registered": registered,
    "registered_versions": registered_versions,
}))
"""


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    folder = tmp_path_factory.mktemp("release")
    for uri in MODEL_URIS:
        tiny_model.save(str(folder / "gcs" / uri[len("gs://") :]))
    given = {
        "project": PROJECT,
        "region": REGION,
        "root": ROOT,
        "endpoint": ENDPOINT,
        "uris": MODEL_URIS,
        "image": "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest",
        "instances": tiny_model.b64_instances(tiny_model.ROWS),
    }
    with vertex_behind_proxy(str(folder / "gcs"), str(folder)) as (models, env, proxy):
        task = subprocess.run(
            [sys.executable, "-c", SCRIPT, json.dumps(given)], env=env, capture_output=True, text=True, timeout=600
        )
        refused_connections = [c for c in proxy.connections() if c.refused]
        unimplemented = list(models.unimplemented)
    assert task.returncode == 0, task.stderr[-4000:]
    done = json.loads(task.stdout.strip().splitlines()[-1])
    done["steps"] = {s["name"]: s for s in done["steps"]}
    return done, refused_connections, unimplemented


def _state(step: dict) -> dict[str, tuple[list[str], int]]:
    """Version id -> (aliases, share of the endpoint's traffic)."""
    return {version: (aliases, traffic) for version, aliases, traffic, _, _ in step["versions"]}


@pytest.mark.slow
def test_every_push_is_a_version_of_one_registry_model_named_after_the_pipeline(released):
    done, refused, unimplemented = released
    assert len(done["models"]) == 1 and done["display_name"] == "penguins"
    labels = {version: labels for version, _, _, labels, _ in done["steps"]["push-3-canary"]["versions"]}
    assert sorted(labels) == ["1", "2", "3"]
    assert labels["1"]["run"] == "job-1" and labels["3"]["run"] == "job-3"  # as Vertex allows label values
    assert {labels[v][registry.OWNER_LABEL] for v in labels} == {
        registry.RegistryModel.of_pipeline("", "", "", ROOT).owner
    }
    assert not refused and not unimplemented


@pytest.mark.slow
def test_the_first_push_takes_all_the_traffic_and_the_champion_alias(released):
    step = released[0]["steps"]["push-1"]
    assert _state(step) == {"1": (["champion", "default"], 100)}
    assert step["answered"] == {"1": 40}
    # Asked for a 30% canary with nothing serving: deployed in full, and said so.
    assert any("deployed in full" in change for change in step["changes"])


@pytest.mark.slow
def test_a_canary_shares_the_traffic_and_holds_the_candidate_alias(released):
    step = released[0]["steps"]["push-2-canary"]
    assert _state(step) == {"2": (["candidate"], 30), "1": (["champion", "default"], 70)}
    assert set(step["answered"]) == {"1", "2"}  # both answered (40 draws at 30/70)
    assert "deployed version 2 to penguins-endpoint with 30% of its traffic" in step["changes"]


@pytest.mark.slow
def test_promote_gives_the_candidate_everything_and_keeps_the_old_champion_as_previous(released):
    steps = released[0]["steps"]
    assert _state(steps["promote"]) == {"2": (["champion", "default"], 100), "1": (["previous"], 0)}
    assert steps["promote"]["answered"] == {"2": 40}
    assert "penguins-endpoint: undeployed version 1" in steps["promote"]["changes"]
    assert "nothing to promote" in steps["promote-again"]["refused"]
    assert _state(steps["promote-again"]) == _state(steps["promote"])  # changed nothing


@pytest.mark.slow
def test_rollback_after_promotion_restores_the_previous_champion(released):
    steps = released[0]["steps"]
    assert _state(steps["rollback-after-promotion"]) == {"2": ([], 0), "1": (["champion", "default"], 100)}
    assert steps["rollback-after-promotion"]["answered"] == {"1": 40}
    assert "nothing to roll back to" in steps["rollback-again"]["refused"]


@pytest.mark.slow
def test_rolling_back_a_canary_undeploys_it_and_removes_its_alias(released):
    steps = released[0]["steps"]
    assert _state(steps["push-3-canary"])["3"] == (["candidate"], 50)
    assert _state(steps["rollback-canary"]) == {"3": ([], 0), "2": ([], 0), "1": (["champion", "default"], 100)}
    assert steps["rollback-canary"]["answered"] == {"1": 40}


@pytest.mark.slow
def test_a_push_in_full_replaces_a_running_canary_and_the_champion(released):
    steps = released[0]["steps"]
    assert _state(steps["push-4-canary"])["4"] == (["candidate"], 20)
    after = _state(steps["push-5-in-full"])
    assert after["5"] == (["champion", "default"], 100) and after["4"] == ([], 0) and after["1"] == (["previous"], 0)
    assert steps["push-5-in-full"]["answered"] == {"5": 40}
    assert "version 4 is no longer the candidate" in steps["push-5-in-full"]["changes"]


@pytest.mark.slow
def test_registering_without_an_endpoint_moves_only_the_aliases(released):
    done = released[0]
    assert done["registered_versions"] == [["2", ["champion", "default"], None], ["1", ["previous"], None]]
    assert not any("deployed" in change for changes in done["registered"] for change in changes)
    assert done["registered"][1][-1] == "version 1 is now previous"


@pytest.mark.slow
def test_refusals_name_what_is_missing(released):
    steps = released[0]["steps"]
    assert "has no model in the registry" in steps["promote-before-any-push"]["refused"]
    assert "the endpoint no-such-endpoint does not exist" in steps["rollback-unknown-endpoint"]["refused"]


@pytest.mark.slow
def test_each_version_carries_its_evaluation_under_vertex_names(released):
    evaluations = released[0]["evaluations"]
    assert all(len(evaluations[v]) == 1 for v in ("1", "2", "3"))
    assert evaluations["2"][0] == {"auRoc": 0.99}  # accuracy has no name in the classification schema


def test_label_values_are_what_vertex_accepts():
    assert registry.label_value("Job_1.2 X") == "job_1-2-x"
    assert registry.label_value("0.9123") == "0-9123"
    assert len(registry.label_value("a" * 100)) == 63 and registry.label_value("...") == "none"
