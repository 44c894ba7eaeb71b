"""The champion record: which model serves a pipeline, with the blessing (and so the
statistics) it was blessed with, one JSON file under the pipeline's root; and the pointers
the Champion component hands on (``resolve``). Who writes, moves and reads it: docs/operating.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import uuid

from runtime.paths import is_under

RECORD_FILE = "champion.json"
POINTER_FILE = "champion_pointer.json"
# The Trainer's serving directory inside a Model artifact (TFX's path_utils).
SERVING_DIR = "Format-Serving"
BLESSED_FILE = "BLESSED"


class RecordError(RuntimeError):
    """The record cannot be moved as asked; the message says why (nothing was changed)."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One pushed model: its Model and ModelBlessing directories, where it was pushed (a
    serving directory's version, or a registry version) and when."""

    model: str
    blessing: str
    pushed_to: str = ""
    version: str = ""
    recorded_at: str = ""

    def describe(self) -> str:
        version = f"version {self.version} " if self.version else ""
        return f"{version}(model {self.model})"


@dataclasses.dataclass(frozen=True)
class Record:
    """What serves (``champion``), a canary beside it (``candidate``), the champions before
    it (``previous``, newest last: where a rollback returns) and those rolled back."""

    champion: Entry | None = None
    candidate: Entry | None = None
    previous: tuple[Entry, ...] = ()
    rolled_back: tuple[Entry, ...] = ()

    def pushed(self, entry: Entry, canary: bool = False) -> Record:
        """A blessed model was pushed: with all of the traffic it is the champion (the one it
        replaces goes to ``previous``, a canary is dropped); as a canary, the candidate."""
        if canary:
            return dataclasses.replace(self, candidate=entry)
        previous = (*self.previous, self.champion) if self.champion else self.previous
        return dataclasses.replace(self, champion=entry, candidate=None, previous=previous)

    def promoted(self) -> Record:
        """The candidate takes all of the traffic and becomes the champion."""
        if self.candidate is None:
            raise RecordError("the record holds no candidate to promote")
        return dataclasses.replace(self, candidate=None).pushed(self.candidate)

    def rolled_back_once(self) -> Record:
        """A canary is dropped; without one, the champion before this one serves again."""
        if self.candidate is not None:
            return dataclasses.replace(self, candidate=None, rolled_back=(*self.rolled_back, self.candidate))
        if self.champion is None or not self.previous:
            raise RecordError("the record holds no earlier champion to roll back to")
        return dataclasses.replace(
            self,
            champion=self.previous[-1],
            previous=self.previous[:-1],
            rolled_back=(*self.rolled_back, self.champion),
        )

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Record:
        def entry(value: dict | None) -> Entry | None:
            return Entry(**value) if value else None

        return cls(
            champion=entry(data.get("champion")),
            candidate=entry(data.get("candidate")),
            previous=tuple(Entry(**e) for e in data.get("previous", ())),
            rolled_back=tuple(Entry(**e) for e in data.get("rolled_back", ())),
        )


def _gfile():
    """TensorFlow's file API (local paths and gs://), imported when a record is read or
    written: the run's "nothing changed" check names the record's path without it."""
    import tensorflow as tf

    return tf.io.gfile


def record_path(pipeline_root: str) -> str:
    return os.path.join(pipeline_root, RECORD_FILE)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def read(pipeline_root: str) -> Record:
    """The pipeline's record (empty before the first push)."""
    path = record_path(pipeline_root)
    if not _gfile().exists(path):
        return Record()
    with _gfile().GFile(path) as f:
        return Record.from_json(json.load(f))


def write(pipeline_root: str, record: Record) -> None:
    """Replaces the record whole: a reader sees the old one or the new one, never a part. A
    local file is written beside it and renamed; a Cloud Storage object is replaced whole by
    one upload."""
    path = record_path(pipeline_root)
    text = json.dumps(record.to_json(), indent=1, sort_keys=True)
    _gfile().makedirs(pipeline_root)
    if "://" in path:
        with _gfile().GFile(path, "w") as f:
            f.write(text)
        return
    partial = f"{path}.{uuid.uuid4().hex}.partial"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


def update(pipeline_root: str, change) -> Record:
    """Reads the record, applies ``change`` (Record -> Record) and writes the result."""
    changed = change(read(pipeline_root))
    write(pipeline_root, changed)
    return changed


def missing_files(entry: Entry) -> str:
    """Why the entry's files cannot serve as a baseline ('' when they can)."""
    if not _gfile().exists(os.path.join(entry.model, SERVING_DIR, "saved_model.pb")):
        return f"its model's files are gone ({entry.model})"
    if not _gfile().exists(os.path.join(entry.blessing, BLESSED_FILE)):
        return f"its blessing's files are gone ({entry.blessing})"
    return ""


def champion_of(pipeline_root: str) -> tuple[Entry | None, str]:
    """The champion this pipeline's next run compares with, or None and why there is none."""
    record = read(pipeline_root)
    entry = record.champion
    if entry is None:
        return None, "no model of this pipeline has been blessed and pushed yet"
    for uri in (entry.model, entry.blessing):
        if not is_under(uri, pipeline_root):
            return None, f"the record names {uri}, which is not under this pipeline's root {pipeline_root}"
    if why := missing_files(entry):
        return None, f"the champion {entry.describe()} cannot be read: {why}"
    return entry, ""


def write_pointer(directory: str, target: str | None, reason: str = "") -> None:
    """Marks an output directory as pointing at ``target`` (None: no champion, and why)."""
    _gfile().makedirs(directory)
    with _gfile().GFile(os.path.join(directory, POINTER_FILE), "w") as f:
        json.dump({"target": target, "reason": reason}, f)


def read_pointer(directory: str) -> dict | None:
    """The pointer in ``directory`` ({"target", "reason"}), or None when it is not one."""
    path = os.path.join(directory, POINTER_FILE)
    if not _gfile().exists(path):
        return None
    with _gfile().GFile(path) as f:
        return json.load(f)


def resolve(directory: str) -> tuple[str | None, str]:
    """The directory to read for an artifact at ``directory``: the champion it points at, or
    None and why there is no champion; an artifact that is no pointer is itself."""
    pointer = read_pointer(directory)
    if pointer is None:
        return directory, ""
    return pointer["target"], pointer.get("reason", "")
