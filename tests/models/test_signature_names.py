"""What TensorFlow keeps as a SavedModel signature's input name, the reason a feature name is
``models.problem.is_feature_name`` (and CSV headers are mapped to one): if a TensorFlow upgrade
changes this, these fail first."""

from __future__ import annotations

import pytest
import tensorflow as tf

from models import signatures
from models.problem import is_feature_name
from tests.support.problems import TAXI


def _saved_input_names(name: str, tmp_path) -> list[str]:
    """The input names of a one-input signature whose input is named ``name``, once saved and loaded."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=name)])
    def serve(column):
        return {"length": tf.strings.length(column)}

    tf.saved_model.save(tf.Module(), str(tmp_path), signatures={"serve": serve})
    return sorted(tf.saved_model.load(str(tmp_path)).signatures["serve"].structured_input_signature[1])


@pytest.mark.parametrize("name", ["Monthly Charges", "Sale Price ($)", "Größe", "_id", "class", "self"])
def test_a_header_that_is_no_graph_node_name_fails_the_export(name, tmp_path):
    assert not is_feature_name(name)
    with pytest.raises((ValueError, TypeError)):
        _saved_input_names(name, tmp_path)


@pytest.mark.parametrize("name", ["a.b", "a-b", "2023_revenue"])
def test_a_node_name_that_is_no_identifier_is_renamed_by_tensorflow(name, tmp_path):
    assert not is_feature_name(name)
    assert _saved_input_names(name, tmp_path) != [name]


@pytest.mark.parametrize("name", ["monthly_charges", "Age", "col_2023_revenue"])
def test_a_feature_name_is_kept_as_it_is(name, tmp_path):
    assert is_feature_name(name)
    assert _saved_input_names(name, tmp_path) == [name]


def test_the_export_refuses_raw_columns_no_input_can_be_named_after_naming_the_fix():
    signatures.check_input_names(list(TAXI.raw_columns), TAXI)
    with pytest.raises(
        ValueError, match=r"'Monthly Charges'.*\[columns\] table \(monthly_charges = 'Monthly Charges'\)"
    ):
        signatures.check_input_names([TAXI.raw_columns[0], "Monthly Charges"], TAXI)
