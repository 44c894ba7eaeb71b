"""``python -m runs.score`` on a pushed model of each shipped task (small local runs):
every row scored, the outputs named as the serving signature names them and equal to what
``serving_default`` answers for the same rows as tf.Examples, and bad input refused in one
line. On Vertex AI, tests/runs/test_vertex_scoring.py."""

from __future__ import annotations

import csv
import glob
import os
import shutil

import numpy as np
import pytest

from models import problem as problem_lib
from models.signatures import PROBABILITIES_KEY, PROBABILITY_KEY
from pipeline.config import PipelineConfig
from runs import score
from tests.support.problems import SHIPPED, SHIPPED_DIRS

RUN_FLAGS = ["--train-steps", "100", "--no-report"]
# Thresholds any model passes: the scoring, not the model, is tested.
EASY = {"taxi": "0", "penguins": "0", "penguin-body-mass": "100000"}


def _pushed_run(name: str, output_root, *extra: str):
    """``local_runner`` on a shipped problem: (problem, config, its CSV)."""
    import local_runner

    directory = str(SHIPPED_DIRS[name])
    flags = [*RUN_FLAGS, "--blessing-threshold", EASY[name], *extra]
    assert local_runner.main(["--problem", directory, "--output-root", str(output_root), *flags]) == 0
    problem = problem_lib.load(directory)
    config = PipelineConfig(problem=problem, output_root=str(output_root), infer_schema=True)
    (data,) = [os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".csv")]
    (transform_dir,) = [
        os.path.dirname(p)
        for p in glob.glob(os.path.join(config.pipeline_root, "Transform", "transform_graph", "*", "metadata"))
    ]
    return problem, config, data, transform_dir


@pytest.fixture(scope="module")
def taxi(tmp_path_factory, sample_dir, trainer, transform):
    """The component tests' Trainer model (the taxi problem on the sample, shared with them)
    as the pushed model of an output root of its own."""
    from tfx.utils import path_utils

    problem = SHIPPED["taxi"]
    config = PipelineConfig(problem=problem, output_root=str(tmp_path_factory.mktemp("taxi")), infer_schema=True)
    shutil.copytree(path_utils.serving_model_path(trainer["model"][0].uri), f"{config.serving_model_dir}/1")
    (data,) = [str(sample_dir / f) for f in os.listdir(sample_dir) if f.endswith(".csv")]
    return problem, config, data, transform["transform_graph"][0].uri


@pytest.fixture(scope="module")
def species(tmp_path_factory):
    return _pushed_run("penguins", tmp_path_factory.mktemp("species"))


@pytest.fixture(scope="module")
def body_mass(tmp_path_factory):
    return _pushed_run("penguin-body-mass", tmp_path_factory.mktemp("body_mass"))


def _score(run, tmp_path, source: str, *extra: str) -> tuple[int, list[dict[str, str]], str]:
    problem, config, _, _ = run
    output = str(tmp_path / "scored.csv")
    argv = ["--problem", str(problem.directory), "--output-root", config.output_root, "--input", source]
    code = score.main([*argv, "--output", output, *extra])
    if code != 0:
        return code, [], output
    with open(output, newline="") as f:
        return code, list(csv.DictReader(f)), output


def _served_default(run, rows: list[dict[str, str]]) -> dict[str, np.ndarray]:
    """``serving_default``'s answer for ``rows`` as tf.Examples (the Evaluator's path)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from runs.scoring import tf_example

    problem, config, _, transform_dir = run
    model_dir = score.served_model_dir(config.serving_model_dir, None)
    raw_spec = tft.TFTransformOutput(transform_dir).raw_feature_spec()
    features = {problem.header_of(c): c for c in problem.raw_columns}
    examples = [tf_example({features.get(k, k): v for k, v in row.items()}, raw_spec) for row in rows]
    answer = tf.saved_model.load(model_dir).signatures["serving_default"](examples=tf.constant(examples))
    return {key: value.numpy().reshape(len(rows), -1) for key, value in answer.items()}


def _input_rows(path: str) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_binary_rows_get_the_probability_and_class_serving_default_gives(taxi, tmp_path):
    problem, _, data, _ = taxi
    code, scored, _ = _score(taxi, tmp_path, data)
    given = _input_rows(data)
    assert code == 0 and len(scored) == len(given)
    assert [r[problem.header_of("fare")] for r in scored] == [r[problem.header_of("fare")] for r in given]
    expected = _served_default(taxi, given[:50])
    got = np.array([float(r[PROBABILITY_KEY]) for r in scored[:50]])
    assert got == pytest.approx(expected[PROBABILITY_KEY][:, 0], abs=1e-6)
    assert [int(r[problem.label.name]) for r in scored[:50]] == list(expected[problem.label.name][:, 0])


@pytest.mark.slow
def test_multi_class_rows_get_a_probability_per_class_and_the_class(species, tmp_path):
    problem, _, data, _ = species
    code, scored, _ = _score(species, tmp_path, data)
    assert code == 0 and len(scored) == len(_input_rows(data))
    columns = [f"{PROBABILITIES_KEY}_{c}" for c in problem.label.classes]
    assert set(columns) <= set(scored[0])
    sums = [sum(float(r[c]) for c in columns) for r in scored]
    assert sums == pytest.approx([1.0] * len(scored), abs=1e-4)
    # The file has the label's own column: the prediction is named beside it, not over it.
    predicted = f"predicted_{problem.label.name}"
    assert problem.header_of(problem.label.name) in scored[0] and {r[predicted] for r in scored} <= set(
        problem.label.classes
    )
    expected = _served_default(species, _input_rows(data)[:30])
    assert np.array([[float(r[c]) for c in columns] for r in scored[:30]]) == pytest.approx(
        expected[PROBABILITIES_KEY], abs=1e-6
    )


@pytest.mark.slow
def test_regression_rows_get_the_predicted_value_beside_their_own(body_mass, tmp_path):
    problem, _, data, _ = body_mass
    code, scored, _ = _score(body_mass, tmp_path, data)
    assert code == 0 and len(scored) == len(_input_rows(data))
    expected = _served_default(body_mass, _input_rows(data)[:30])
    got = [float(r[f"predicted_{problem.label.name}"]) for r in scored[:30]]
    assert got == pytest.approx(expected[problem.label.name][:, 0], rel=1e-5)


@pytest.mark.slow
def test_a_folder_of_files_is_scored_whole_and_a_version_can_be_chosen(species, tmp_path, capsys):
    _, config, data, _ = species
    folder = tmp_path / "in"
    folder.mkdir()
    rows = open(data, encoding="utf-8-sig").read().splitlines()
    (folder / "a.csv").write_text("\n".join(rows[:101]) + "\n")
    (folder / "b.csv").write_text("\n".join([rows[0], *rows[101:]]) + "\n")
    (version,) = os.listdir(config.serving_model_dir)
    code, scored, _ = _score(species, tmp_path, str(folder), "--version", version)
    assert code == 0 and len(scored) == len(rows) - 1
    code, _, _ = _score(species, tmp_path, str(folder), "--version", "12345")
    assert code == 2
    # Files whose headers differ: refused, and no half-written output is left behind.
    given = _input_rows(data)[:5]
    with open(folder / "c.csv", "w", newline="") as f:  # the same columns in another order
        writer = csv.DictWriter(f, list(reversed(list(given[0]))))
        writer.writeheader()
        writer.writerows(given)
    os.remove(tmp_path / "scored.csv")
    capsys.readouterr()
    code, _, output = _score(species, tmp_path, str(folder))
    assert code == 2 and "headers differ" in capsys.readouterr().err
    assert not os.path.exists(output) and not os.path.exists(output + ".partial")


@pytest.mark.slow
def test_a_column_the_model_reads_missing_from_the_file_is_named(species, tmp_path, capsys):
    problem, _, data, _ = species
    needed = problem.features.inputs[0]
    rows = _input_rows(data)[:20]
    kept = [k for k in rows[0] if k != problem.header_of(needed)]
    source = tmp_path / "lacking.csv"
    with open(source, "w", newline="") as f:
        writer = csv.DictWriter(f, kept, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    code, _, output = _score(species, tmp_path, str(source))
    err = capsys.readouterr().err
    assert code == 2 and f"lacks the column {problem.header_of(needed)!r}" in err
    assert not os.path.exists(output)


@pytest.mark.slow
def test_rows_that_break_the_contract_are_refused_before_scoring(species, tmp_path, capsys):
    problem, _, data, _ = species
    rows = _input_rows(data)
    inputs = {problem.header_of(c) for c in problem.features.inputs}
    column = next(k for k in rows[0] if k in inputs and _is_number(rows[0][k]))
    for row in rows[:40]:
        row[column] = "not a number"
    source = tmp_path / "bad.csv"
    with open(source, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, _, output = _score(species, tmp_path, str(source))
    err = capsys.readouterr().err
    assert code == 2 and "do not meet the contract" in err and column in err, err
    assert not os.path.exists(output)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_nothing_pushed_yet_is_said(tmp_path, capsys):
    shutil.copytree(SHIPPED_DIRS["penguins"], tmp_path / "p")
    argv = ["--problem", str(tmp_path / "p"), "--output-root", str(tmp_path), "--input", str(tmp_path / "p")]
    assert score.main([*argv, "--output", str(tmp_path / "o.csv")]) == 2
    assert "nothing was pushed to" in capsys.readouterr().err
    assert SHIPPED["penguins"].name in str(tmp_path / "serving_model" / SHIPPED["penguins"].name)
