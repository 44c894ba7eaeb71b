"""Warm start from a base model's saved weights: copied, remapped by token, or left fresh."""

from __future__ import annotations

import numpy as np
import pytest

from models import model as model_lib
from models import warm_start
from models.hparams import HParams
from models.problem import transformed_name
from tests.support.problems import TAXI

HPARAMS = HParams(hidden_units=(8, 4))


class _Vocabularies:
    """What warm start and the model builder read of Transform's output: the vocabularies."""

    def __init__(self, tokens: dict[str, list[bytes]]):
        self._tokens = tokens

    def vocabulary_by_name(self, key: str) -> list[bytes]:
        return self._tokens[key]

    def vocabulary_size_by_name(self, key: str) -> int:
        return len(self._tokens[key])


def _vocabularies(**changed: list[bytes]) -> _Vocabularies:
    tokens = {key: [f"{key}-{i}".encode() for i in range(6)] for key in TAXI.features.categorical}
    return _Vocabularies({**tokens, **changed})


def _model(vocabularies: _Vocabularies, seed: int):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)
    sizes = model_lib.categorical_sizes(TAXI, vocabularies)
    return model_lib.build_keras_model(TAXI, sizes, HPARAMS)


def _weights(model, name: str) -> list[np.ndarray]:
    return model.get_layer(name).get_weights()


@pytest.fixture
def base(tmp_path):
    """A trained-looking base model's serving directory, with its weights saved beside it."""
    vocabularies = _vocabularies()
    model = _model(vocabularies, seed=1)
    serving_dir = tmp_path / "model" / "Format-Serving"
    serving_dir.mkdir(parents=True)
    warm_start.save(model, vocabularies, TAXI, str(serving_dir))
    return model, vocabularies, str(serving_dir)


def test_the_same_vocabularies_copy_every_layer(base):
    old, vocabularies, serving_dir = base
    new = _model(vocabularies, seed=2)
    started = warm_start.apply(new, serving_dir, vocabularies, TAXI)
    assert (
        not started.fresh
        and not started.remapped
        or set(started.remapped) <= {f"embed_{transformed_name(k)}" for k in TAXI.features.categorical}
    )
    for layer in (layer for layer in new.layers if layer.weights):
        for mine, theirs in zip(layer.get_weights(), old.get_layer(layer.name).get_weights(), strict=True):
            np.testing.assert_array_equal(mine, theirs)
    assert "warm-started" in started.describe()


def test_a_reordered_vocabulary_keeps_each_token_s_row_and_starts_new_tokens_fresh(base):
    old, vocabularies, serving_dir = base
    key = TAXI.features.categorical[0]
    old_tokens = vocabularies.vocabulary_by_name(key)
    # Same size (so the same embedding width), two tokens swapped, one replaced by a new one.
    tokens = [old_tokens[1], old_tokens[0], *old_tokens[2:5], b"new-token"]
    changed = _vocabularies(**{key: tokens})
    new = _model(changed, seed=2)
    fresh_before = _weights(new, f"embed_{transformed_name(key)}")[0].copy()
    started = warm_start.apply(new, serving_dir, changed, TAXI)

    embedding = f"embed_{transformed_name(key)}"
    assert embedding in started.remapped
    mine, theirs = _weights(new, embedding)[0], _weights(old, embedding)[0]
    np.testing.assert_array_equal(mine[0], theirs[1])
    np.testing.assert_array_equal(mine[1], theirs[0])
    np.testing.assert_array_equal(mine[2:5], theirs[2:5])
    np.testing.assert_array_equal(mine[5], fresh_before[5])  # the new token
    # The wide part's rows are positions in every vocabulary at once: not taken when one moved.
    assert "wide_weights" in started.fresh
    np.testing.assert_array_equal(_weights(new, "hidden_1")[0], _weights(old, "hidden_1")[0])


def test_a_layer_whose_shape_changed_starts_fresh(base):
    _, vocabularies, serving_dir = base
    key = TAXI.features.categorical[0]
    grown = _vocabularies(**{key: [f"t{i}".encode() for i in range(400)]})  # a wider embedding
    new = _model(grown, seed=2)
    started = warm_start.apply(new, serving_dir, grown, TAXI)
    assert f"embed_{transformed_name(key)}" in started.fresh
    assert "hidden_0" in started.fresh  # its input grew with the embedding
    assert "hidden_1" in started.copied


def test_without_a_base_or_its_weights_training_starts_from_scratch_and_says_why(tmp_path):
    vocabularies = _vocabularies()
    new = _model(vocabularies, seed=2)
    assert warm_start.apply(new, None, vocabularies, TAXI, "warm start is off").describe() == (
        "trained from scratch (warm start is off)"
    )
    older = warm_start.apply(new, str(tmp_path / "Format-Serving"), vocabularies, TAXI)
    assert older.base is None and warm_start.WEIGHTS_FILE in older.reason


def test_the_record_round_trips():
    record = warm_start.WarmStart("b", ("x",), ("y",), ("z",)).to_record()
    assert warm_start.WarmStart.from_record(record).describe() == "warm-started 2 of 3 layers from b; fresh: z"
