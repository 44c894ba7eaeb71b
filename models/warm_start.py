"""Warm start: a new model begins from the champion's weights where its shape allows (a
layer by name and shapes, an embedding row by row by token, the wide part only when no
vocabulary changed). Each export keeps its weights and vocabularies beside its serving
directory for the next run (docs/spans.md).
"""

from __future__ import annotations

import dataclasses
import io
import os

import numpy as np
import tensorflow as tf
import tf_keras as keras
from absl import logging

from models.model import transformed_name
from models.problem import Problem

WEIGHTS_FILE = "keras_weights.npz"
_VOCABULARY = "vocabulary:"
_WIDE_LAYER = "wide_weights"


@dataclasses.dataclass(frozen=True)
class WarmStart:
    """What a model took from its base: layers copied, remapped by token, left fresh."""

    base: str | None
    copied: tuple[str, ...] = ()
    remapped: tuple[str, ...] = ()
    fresh: tuple[str, ...] = ()
    reason: str = ""

    def describe(self) -> str:
        if self.base is None:
            return f"trained from scratch ({self.reason})"
        taken = len(self.copied) + len(self.remapped)
        total = taken + len(self.fresh)
        fresh = f"; fresh: {', '.join(self.fresh)}" if self.fresh else ""
        return f"warm-started {taken} of {total} layers from {self.base}{fresh}"

    def to_record(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict) -> WarmStart:
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in record.items()})


def _weights_path(serving_dir: str) -> str:
    return os.path.join(os.path.dirname(serving_dir.rstrip("/")), WEIGHTS_FILE)


def _weighted_layers(model: keras.Model) -> list[tuple[keras.layers.Layer, list[np.ndarray]]]:
    """The model's own layers that have weights, with them (the export attaches Transform's
    layer to the model; it is rebuilt from the transform graph, not trained)."""
    found = []
    for layer in model.layers:
        try:
            weights = layer.get_weights()
        except NotImplementedError:
            continue
        if weights:
            found.append((layer, weights))
    return found


def save(model: keras.Model, tf_transform_output, problem: Problem, serving_dir: str) -> None:
    """Writes the model's weights and its vocabularies beside ``serving_dir``."""
    arrays = {}
    for layer, weights in _weighted_layers(model):
        for index, weight in enumerate(weights):
            arrays[f"{layer.name}/{index}"] = weight
    for key in problem.features.categorical:
        arrays[_VOCABULARY + transformed_name(key)] = np.array(tf_transform_output.vocabulary_by_name(key), dtype=bytes)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with tf.io.gfile.GFile(_weights_path(serving_dir), "wb") as f:
        f.write(buffer.getvalue())


def _load(base_serving_dir: str) -> tuple[dict[str, list[np.ndarray]], dict[str, list[bytes]]] | None:
    path = _weights_path(base_serving_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "rb") as f:
        saved = np.load(io.BytesIO(f.read()), allow_pickle=False)
        weights: dict[str, list[np.ndarray]] = {}
        vocabularies = {}
        for name in saved.files:
            if name.startswith(_VOCABULARY):
                vocabularies[name[len(_VOCABULARY) :]] = list(saved[name])
            else:
                layer, index = name.rsplit("/", 1)
                weights.setdefault(layer, []).append((int(index), saved[name]))
    return {k: [w for _, w in sorted(v, key=lambda p: p[0])] for k, v in weights.items()}, vocabularies


def _remap_rows(new: np.ndarray, old: np.ndarray, new_tokens: list[bytes], old_tokens: list[bytes]) -> np.ndarray:
    """``new`` with each known token's row taken from ``old`` (rows past the tokens: OOV, fresh)."""
    where = {token: row for row, token in enumerate(old_tokens)}
    result = new.copy()
    for row, token in enumerate(new_tokens):
        if token in where:
            result[row] = old[where[token]]
    return result


def apply(
    model: keras.Model, base_serving_dir: str | None, tf_transform_output, problem: Problem, why_not: str = ""
) -> WarmStart:
    """Sets ``model``'s weights from the base model's where shapes allow; says what it did."""
    if base_serving_dir is None:
        return WarmStart(None, reason=why_not or "no blessed model yet")
    loaded = _load(base_serving_dir)
    if loaded is None:
        why = f"{base_serving_dir} has no {WEIGHTS_FILE} (a trees model, or exported before warm start)"
        return WarmStart(None, reason=why)
    old_weights, old_vocabularies = loaded
    vocabularies = {
        transformed_name(key): list(tf_transform_output.vocabulary_by_name(key)) for key in problem.features.categorical
    }
    vocabularies_unchanged = vocabularies == old_vocabularies
    copied, remapped, fresh = [], [], []
    for layer, new in _weighted_layers(model):
        old = old_weights.get(layer.name)
        same_shapes = old is not None and [w.shape for w in old] == [w.shape for w in new]
        feature = layer.name.removeprefix("embed_")
        changed = vocabularies.get(feature) != old_vocabularies.get(feature)
        if old is not None and changed and feature in vocabularies and feature in old_vocabularies:
            if not same_shapes and [w.shape[1:] for w in old] != [w.shape[1:] for w in new]:
                fresh.append(layer.name)
                continue
            layer.set_weights(
                [
                    _remap_rows(n, o, vocabularies[feature], old_vocabularies[feature])
                    for n, o in zip(new, old, strict=True)
                ]
            )
            remapped.append(layer.name)
        elif same_shapes and (layer.name != _WIDE_LAYER or vocabularies_unchanged):
            layer.set_weights(old)
            copied.append(layer.name)
        else:
            fresh.append(layer.name)
    result = WarmStart(base_serving_dir, tuple(copied), tuple(remapped), tuple(fresh))
    logging.info("Warm start: %s", result.describe())
    return result
