"""The explanation spec (components/explanation.py) is read off the exported signature:
every input ``serving_raw`` takes, by its name, and the output the Evaluator judges."""

from __future__ import annotations

import pytest

from components.explanation import explanation_spec
from models import signatures


def test_the_spec_names_the_raw_signatures_inputs_and_the_judged_output(tmp_path):
    from tests.support import tiny_model

    tiny_model.save(str(tmp_path / "m"))
    metadata, parameters = explanation_spec(str(tmp_path / "m"), signatures.PROBABILITY_KEY)
    assert sorted(metadata.inputs) == ["company", "fare"]  # tiny_model's serving_raw inputs
    assert {k: v.input_tensor_name for k, v in metadata.inputs.items()} == {"company": "company", "fare": "fare"}
    assert list(metadata.outputs) == ["probability"]
    assert parameters.sampled_shapley_attribution.path_count == 10
    with pytest.raises(ValueError, match="has no output 'probabilities'"):
        explanation_spec(str(tmp_path / "m"), signatures.PROBABILITIES_KEY)
    with pytest.raises(ValueError, match="between 1 and 50"):
        explanation_spec(str(tmp_path / "m"), signatures.PROBABILITY_KEY, path_count=0)
