"""The rehearsal's artifact and execution store: what Vertex ML Metadata holds for a
pipeline, kept in one SQLite file that persists across rehearsals.

Artifacts get Vertex-style resource names (``projects/<p>/locations/<r>/metadataStores/
default/artifacts/<id>``) with ids that only grow, so "newest first" is "highest id first".
Executions keep their cache key and outputs, so an unchanged task can be reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from typing import Any

from rehearsal.filters import Query

_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT UNIQUE,
    pipeline TEXT NOT NULL,
    job_id TEXT NOT NULL,
    task TEXT NOT NULL,
    output_key TEXT NOT NULL,
    schema_title TEXT NOT NULL,
    type TEXT NOT NULL,
    uri TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT 'PENDING',
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS executions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pipeline TEXT NOT NULL,
    job_id TEXT NOT NULL,
    task TEXT NOT NULL,
    cache_key TEXT,
    state TEXT NOT NULL,
    outputs TEXT NOT NULL DEFAULT '{}',
    started REAL NOT NULL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS executions_by_key ON executions (pipeline, cache_key, state);
"""


class ArtifactStore:
    def __init__(self, path: str, project: str, region: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self.prefix = f"projects/{project}/locations/{region}/metadataStores/default/artifacts/"
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # Executions

    def start_execution(self, pipeline: str, job_id: str, task: str) -> int:
        cursor = self._db.execute(
            "INSERT INTO executions (pipeline, job_id, task, state, started) VALUES (?, ?, ?, 'RUNNING', ?)",
            (pipeline, job_id, task, time.time()),
        )
        return cursor.lastrowid

    def finish_execution(self, execution_id: int, state: str, cache_key: str | None, outputs: Mapping) -> None:
        self._db.execute(
            "UPDATE executions SET state = ?, cache_key = ?, outputs = ?, finished = ? WHERE id = ?",
            (state, cache_key, json.dumps(outputs), time.time(), execution_id),
        )

    def cached_outputs(self, pipeline: str, cache_key: str) -> dict[str, list[dict]] | None:
        """The outputs of the newest succeeded execution with this key whose artifacts are
        all still LIVE, or None."""
        rows = self._db.execute(
            "SELECT outputs FROM executions WHERE pipeline = ? AND cache_key = ? AND state = 'SUCCEEDED' "
            "ORDER BY id DESC",
            (pipeline, cache_key),
        )
        for row in rows:
            found = {k: [self.artifact(a["name"]) for a in v] for k, v in json.loads(row["outputs"]).items()}
            if all(a and a["state"] == "LIVE" for artifacts in found.values() for a in artifacts):
                return found
        return None

    # Artifacts

    def new_artifact(
        self, pipeline: str, job_id: str, task: str, output_key: str, artifact_type: Mapping, uri_of
    ) -> dict[str, Any]:
        """Registers an output artifact before its task runs (PENDING); ``uri_of(id)`` lays
        out its URI from the id."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO artifacts (pipeline, job_id, task, output_key, schema_title, type, uri, created) "
                "VALUES (?, ?, ?, ?, ?, ?, '', ?)",
                (
                    pipeline,
                    job_id,
                    task,
                    output_key,
                    schema_title(artifact_type),
                    json.dumps(artifact_type),
                    time.time(),
                ),
            )
            artifact_id = cursor.lastrowid
            db.execute(
                "UPDATE artifacts SET name = ?, uri = ? WHERE id = ?",
                (self.prefix + str(artifact_id), uri_of(artifact_id), artifact_id),
            )
        return self.artifact(self.prefix + str(artifact_id))

    def publish(self, name: str, metadata: Mapping[str, Any], uri: str | None = None) -> None:
        """The task succeeded: the artifact is LIVE with what its producer wrote."""
        self._db.execute(
            "UPDATE artifacts SET state = 'LIVE', metadata = ?, uri = COALESCE(?, uri) WHERE name = ?",
            (json.dumps(metadata), uri, name),
        )

    def abandon(self, names: list[str]) -> None:
        self._db.executemany("UPDATE artifacts SET state = 'ABANDONED' WHERE name = ?", [(n,) for n in names])

    def artifact(self, name: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM artifacts WHERE name = ?", (name,)).fetchone()
        return _artifact(row) if row else None

    def query(self, query: Query, limit: int) -> list[dict[str, Any]]:
        """Artifacts matching ``query``, newest first, at most ``limit``: within the
        context ``in_context`` names, else across every pipeline in the store. KFP documents
        a query without ``in_context`` as scoped to the pipeline's context (its name, which
        two pipelines may share); the rehearsal takes the wider reading, so that a compiled
        query proves it finds the pipeline's own artifacts by itself
        (``pipeline.compiler`` says how it does)."""
        if query.context:
            rows = self._db.execute("SELECT * FROM artifacts WHERE pipeline = ? ORDER BY id DESC", (query.context,))
        else:
            rows = self._db.execute("SELECT * FROM artifacts ORDER BY id DESC")
        found = []
        for row in rows:
            artifact = _artifact(row)
            if query.matches(artifact):
                found.append(artifact)
                if len(found) == limit:
                    break
        return found


def schema_title(artifact_type: Mapping[str, Any]) -> str:
    """``tfx.Model`` from a type given by ``schemaTitle`` or by an ``instanceSchema`` YAML."""
    if "schemaTitle" in artifact_type:
        return artifact_type["schemaTitle"]
    import yaml

    return (yaml.safe_load(artifact_type.get("instanceSchema", "")) or {}).get("title", "system.Artifact")


def _artifact(row: sqlite3.Row) -> dict[str, Any]:
    found = dict(row)
    found["metadata"] = json.loads(found["metadata"])
    found["type"] = json.loads(found["type"])
    return found
