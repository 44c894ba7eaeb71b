"""The Tuner's user code: a KerasTuner random search over the model's hyperparameters,
trials trained exactly as the Trainer trains, and the mapping of the best ones back onto
``HParams`` for the Trainer (docs/model.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from models.hparams import HParams
from runtime import speedups

# The searched hyperparameters and their choices. hidden_units is a string ("64,32"), as
# KerasTuner's choices are scalars.
SEARCH_SPACE: dict[str, tuple] = {
    "learning_rate": (0.0003, 0.001, 0.003),
    "hidden_units": ("32,16", "64,32", "128,64"),
    "dropout": (0.0, 0.2, 0.4),
    "l2": (0.0, 1e-4, 1e-3),
}
# Keys of the Tuner's custom_config.
BASE_KEY, TRIALS_KEY, SPACE_KEY = "base_hparams", "max_trials", "search_space"


def tuner_custom_config(
    base: HParams, max_trials: int, search_space: Mapping[str, tuple] | None = None
) -> dict[str, Any]:
    """The Tuner's custom_config: the HParams the search starts from, its trial budget,
    and the space (``SEARCH_SPACE`` unless given)."""
    if max_trials < 1:
        raise ValueError(f"The tuning budget must be at least 1 trial, got {max_trials}")
    space = dict(search_space or SEARCH_SPACE)
    unknown = sorted(set(space) - set(SEARCH_SPACE))
    if unknown or any(not choices for choices in space.values()):
        raise ValueError(f"Search space keys must be among {sorted(SEARCH_SPACE)}, each with choices; got {space!r}")
    return {
        BASE_KEY: base.to_custom_config(),
        TRIALS_KEY: max_trials,
        SPACE_KEY: {name: list(choices) for name, choices in space.items()},
    }


def apply_best(hparams: HParams, hyperparameters: Mapping[str, Any]) -> HParams:
    """``hparams`` with the Tuner's choices. ``hyperparameters`` is what TFX hands the
    Trainer (``fn_args.hyperparameters``): a KerasTuner ``HyperParameters`` config, whose
    ``values`` hold the choices, or the values themselves."""
    values = hyperparameters.get("values", hyperparameters)
    unknown = sorted(set(values) - set(SEARCH_SPACE))
    if unknown:
        raise ValueError(f"The Tuner chose {unknown}, which HParams cannot take; tunable: {sorted(SEARCH_SPACE)}")
    chosen = {name: _hparam(name, value) for name, value in values.items()}
    return dataclasses.replace(hparams, **chosen)


def _hparam(name: str, value: Any) -> Any:
    if name == "hidden_units":
        try:
            return tuple(int(units) for units in str(value).split(","))
        except ValueError as err:
            raise ValueError(f"hidden_units must be comma-separated layer sizes like '64,32', got {value!r}") from err
    return float(value)


def tuner_fn(fn_args):
    """TFX Tuner entry point (``Tuner(tuner_fn='models.tuning.tuner_fn')``)."""
    import tensorflow_transform as tft
    from tfx.components.tuner.component import TunerFnResult

    from models import model as model_lib
    from models.data import datasets
    from models.preprocessing import problem_of

    config = fn_args.custom_config or {}
    speedups.follow(config)
    problem = problem_of(config)
    base, budget = _trial_hparams_and_budget(fn_args, HParams.from_custom_config(config.get(BASE_KEY)))
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    tuner = _random_search(
        problem,
        base,
        config.get(SPACE_KEY) or SEARCH_SPACE,
        model_lib.categorical_sizes(problem, tf_transform_output),
        max_trials=int(config.get(TRIALS_KEY, 1)),
        directory=fn_args.working_dir,
    )
    train, evaluation = datasets(
        fn_args,
        tf_transform_output,
        base.per_replica_batch_size,
        False,
        None,
        base.in_memory_max_mb * 2**20,
        train_rows=budget.max_steps * base.per_replica_batch_size,
        label_key=problem.label_key,
    )
    return TunerFnResult(
        tuner=tuner,
        fit_kwargs={
            "x": train,
            "validation_data": evaluation,
            "epochs": budget.epochs,
            "steps_per_epoch": budget.steps_per_epoch,
            "verbose": 2,
        },
    )


def _trial_hparams_and_budget(fn_args, base: HParams):
    """The budget each trial trains within (the Trainer's, on one replica), and ``base``
    with weight averaging off when that budget is too short for it."""
    from models import budget as budget_lib
    from models.data import count_records

    budget = budget_lib.choose(
        fn_args.train_steps,
        base.epochs,
        base.per_replica_batch_size,
        lambda: count_records(fn_args.train_files),
        max_rows_seen=base.max_rows_seen,
    )
    return dataclasses.replace(base, ema_momentum=base.ema_momentum_for(budget.max_steps)), budget


def _random_search(
    problem, base: HParams, space: Mapping[str, Any], sizes: Mapping[str, int], *, max_trials: int, directory: str
):
    """KerasTuner's random search over ``space``, each trial the model built from ``base``
    with the trial's choices and judged on the metric the training schedule watches."""
    import keras_tuner

    from models import model as model_lib
    from models.iterator_release import releasing

    objective, mode = model_lib.monitored_metric(problem)

    def build(hp: keras_tuner.HyperParameters):
        values = {name: hp.Choice(name, list(choices)) for name, choices in space.items()}
        return model_lib.build_keras_model(problem, sizes, apply_best(base, values))

    class Search(keras_tuner.RandomSearch):
        """KerasTuner's random search, each trial trained by tf-keras: this KerasTuner sees
        Keras 3 installed and would refuse tf-keras models in its own trial loop."""

        def run_trial(self, trial, **fit_kwargs):
            model = self.hypermodel.build(trial.hyperparameters)
            with releasing(model):
                history = model.fit(**fit_kwargs)
            best = max if mode == "max" else min
            return {objective: best(history.history[objective])}

    return Search(
        build,
        objective=keras_tuner.Objective(objective, direction=mode),
        max_trials=max_trials,
        directory=directory,
        project_name=problem.name.replace("-", "_"),
    )
