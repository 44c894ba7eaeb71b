"""The choose family (models/choice.py): its metrics, its split of the training rows, its
rule, and ``run_fn`` choosing for real on the sample's ExampleGen and Transform output."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import tensorflow as tf

from models import choice, trainer
from models.hparams import HParams
from models.problem import ModelFamily, Task
from tests.support.fn_args import fn_args_for
from tests.support.problems import SHIPPED, TAXI, with_problem

TAXI_CHOOSING = dataclasses.replace(TAXI, model=ModelFamily.CHOOSE)


def _problem(task: Task, metric: str):
    """A shipped problem of ``task``, blessed on ``metric``."""
    shipped = next(p for p in SHIPPED.values() if p.task == task)
    return dataclasses.replace(shipped, blessing=dataclasses.replace(shipped.blessing, metric=metric))


def test_auc_is_the_chance_a_positive_outscores_a_negative():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    scores = np.round(rng.random(200) + 0.3 * labels, 1)  # rounded: many ties
    pairs = [
        1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(scores[labels == 1], scores[labels == 0])
    ]
    measured = choice.metric_value(_problem(Task.BINARY, "auc"), labels, scores.reshape(-1, 1))
    assert measured == pytest.approx(np.mean(pairs))


def test_auc_of_one_class_is_refused():
    with pytest.raises(ValueError, match="one class"):
        choice.metric_value(_problem(Task.BINARY, "auc"), np.ones(4), np.linspace(0, 1, 4))


def test_accuracy_binary_and_multiclass_and_the_errors():
    binary = _problem(Task.BINARY, "accuracy")
    assert choice.metric_value(binary, np.array([1, 0, 1, 0]), np.array([[0.9], [0.2], [0.4], [0.6]])) == 0.5
    multiclass = _problem(Task.MULTICLASS, "accuracy")
    probabilities = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3]])
    assert choice.metric_value(multiclass, np.array([0, 2, 0]), probabilities) == pytest.approx(2 / 3)
    labels, values = np.array([1.0, 2.0, 4.0]), np.array([[2.0], [2.0], [1.0]])
    errors = values[:, 0] - labels
    regression = _problem(Task.REGRESSION, "rmse")
    assert choice.metric_value(regression, labels, values) == pytest.approx(np.sqrt(np.mean(errors**2)))
    mae = _problem(Task.REGRESSION, "mae")
    assert choice.metric_value(mae, labels, values) == pytest.approx(np.mean(np.abs(errors)))


def test_the_better_trial_by_the_metrics_direction_and_the_network_on_a_tie():
    auc, rmse = _problem(Task.BINARY, "auc"), _problem(Task.REGRESSION, "rmse")
    network, trees = choice.Trial(ModelFamily.NETWORK, 0.8, 1), choice.Trial(ModelFamily.TREES, 0.9, 1)
    assert choice.better(auc, [network, trees]) is trees
    assert choice.better(rmse, [network, trees]) is network
    tied = choice.Trial(ModelFamily.TREES, 0.8, 1)
    assert choice.better(auc, [network, tied]) is network and choice.better(auc, [tied, network]) is network


def test_the_rule_chooses_on_one_process_and_says_why_not_elsewhere():
    assert choice.reason_not_to_choose(1_000_000, 5_000, single_process=True, tuned=False) == ""
    several = choice.reason_not_to_choose(1_000, 5_000, single_process=False, tuned=False)
    assert "several" in several and choice.CHOOSE_COMMAND in several
    assert "Tuner" in choice.reason_not_to_choose(1_000, 5_000, single_process=True, tuned=True)
    assert "too few" in choice.reason_not_to_choose(3, 5_000, single_process=True, tuned=False)
    assert "choice_rows is 0" in choice.reason_not_to_choose(10, 0, single_process=True, tuned=False)


def test_a_larger_split_is_sampled_down_to_the_choices_rows():
    assert choice.sample_step(100_000, 100_000) == 1 and choice.sample_step(99, 100_000) == 1
    assert choice.sample_step(100_001, 100_000) == 2 and choice.sample_step(218_344, 100_000) == 3
    assert 218_344 / choice.sample_step(218_344, 100_000) <= 100_000


def test_a_choice_round_trips_its_record_and_says_both_figures_and_the_cost():
    trials = (choice.Trial(ModelFamily.NETWORK, 0.81, 12.0), choice.Trial(ModelFamily.TREES, 0.83, 3.5))
    chosen = choice.Choice(ModelFamily.TREES, "auc", "", trials, 800, 200)
    assert choice.Choice.from_record(chosen.to_record()) == chosen
    text = chosen.describe()
    assert "the trees" in text and "network 0.8100" in text and "trees 0.8300" in text and "16 s" in text
    assert "200 of its 1,000 rows" in text and "not the eval split" in text
    sampled = dataclasses.replace(chosen, sampled_from=3_000)
    assert "200 of a sample of 1,000 of its 3,000 rows" in sampled.describe()
    tuned = choice.not_chosen(TAXI, "a Tuner chose")
    assert not tuned.chose and tuned.describe() == "the network (a Tuner chose)"


def test_the_training_rows_split_into_a_fit_and_a_validation_part(tmp_path):
    rows = [f"row {i}".encode() for i in range(23)]
    with tf.io.TFRecordWriter(str(tmp_path / "a.gz"), options="GZIP") as first:
        for row in rows[:10]:
            first.write(row)
    with tf.io.TFRecordWriter(str(tmp_path / "b.gz"), options="GZIP") as second:
        for row in rows[10:]:
            second.write(row)
    for step in (1, 3):
        fit, validation, fit_rows, validation_rows = choice.split_training_rows(
            [str(tmp_path / "*.gz")], str(tmp_path / f"out{step}"), step
        )
        read = [
            list(tf.data.TFRecordDataset(p, compression_type="GZIP").as_numpy_iterator()) for p in (fit, validation)
        ]
        sample = rows[::step]
        assert read[1] == sample[choice.VALIDATION_EVERY - 1 :: choice.VALIDATION_EVERY]
        assert sorted(read[0] + read[1]) == sorted(sample) and not set(read[0]) & set(read[1])
        assert (fit_rows, validation_rows) == (len(read[0]), len(read[1]))


@pytest.fixture
def spied_families(monkeypatch):
    """Every family ``run_fn`` trains, with the files it trains and validates on."""
    calls = []
    real = trainer._train_family

    def spy(family, fn_args, plan, extra_callbacks):
        calls.append((family, list(fn_args.train_files), list(fn_args.eval_files)))
        return real(family, fn_args, plan, extra_callbacks)

    monkeypatch.setattr(trainer, "_train_family", spy)
    return calls


@pytest.mark.slow
def test_run_fn_chooses_on_a_sample_of_the_training_split_alone_and_trains_the_better(
    trainer_inputs, tmp_path, spied_families
):
    """The choice's rows capped below the split's: the families are compared on a sample of
    the training split (its fit and validation parts as
    ``test_the_training_rows_split_into_a_fit_and_a_validation_part`` splits them), then the
    better one trains on the whole split."""
    rows = trainer.count_records(fn_args_for(trainer_inputs, tmp_path / "count", {}).train_files)
    config = with_problem(HParams(choice_rows=rows // 2).to_custom_config(), problem=TAXI_CHOOSING)
    fn_args = fn_args_for(trainer_inputs, tmp_path, config, train_steps=16)
    trainer.run_fn(fn_args)
    record = trainer.read_training_record(fn_args.model_run_dir)
    made = choice.Choice.from_record(record["choice"])
    assert [t.family for t in made.trials] == list(choice.FAMILIES) and made.metric == "auc"
    assert made.family == choice.better(TAXI, made.trials).family
    assert (record.get("family") == "trees") == (made.family == ModelFamily.TREES)
    assert made.chose and made.sampled_from == rows
    assert made.fit_rows + made.validation_rows == len(range(0, rows, choice.sample_step(rows, rows // 2)))
    trials, final = spied_families[:2], spied_families[2:]
    assert [family for family, _, _ in trials] == list(choice.FAMILIES)
    for _, train_files, eval_files in trials:
        assert not set(train_files + eval_files) & set(fn_args.train_files + fn_args.eval_files)
    assert final == [(made.family, fn_args.train_files, fn_args.eval_files)]
    assert tf.saved_model.load(fn_args.serving_model_dir).signatures


@pytest.mark.slow
def test_run_fn_with_the_choice_off_trains_the_network_and_says_so(trainer_inputs, tmp_path, spied_families):
    config = with_problem(HParams(choice_rows=0).to_custom_config(), problem=TAXI_CHOOSING)
    fn_args = fn_args_for(trainer_inputs, tmp_path, config, train_steps=4)
    trainer.run_fn(fn_args)
    made = choice.Choice.from_record(trainer.read_training_record(fn_args.model_run_dir)["choice"])
    assert made.family == ModelFamily.NETWORK and not made.chose and "choice_rows is 0" in made.reason
    assert [family for family, _, _ in spied_families] == [ModelFamily.NETWORK]
