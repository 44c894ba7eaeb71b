"""What the epoch-end schedule (models/callbacks.py) does to quality and time: ``run_fn``
trained under several schedule settings on the embedded data, each final model's AUC on
the whole eval split (the Evaluator's measure), medians over repeats.

    python -m bench.schedule [--repeats 3] [--configs defaults off ...]

ExampleGen and Transform come from one local pipeline run (made once, under the output
directory); within a repeat every configuration runs once, so machine noise spreads evenly.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.measure import latest_dir
from pipeline.config import DEFAULT_OUTPUT_ROOT

DEFAULT_OUTPUT_DIR = Path(DEFAULT_OUTPUT_ROOT) / "bench" / "schedule"
PIPELINE_NAME = "taxi-big-tipper"
OFF = {"early_stopping_patience": 0, "reduce_lr_patience": 0, "keep_best_epoch": False}
# name: (train_steps, HParams overrides). The pipeline's training is 400 steps in 4 epochs.
CONFIGS: dict[str, tuple[int, dict[str, Any]]] = {
    "off": (400, OFF),
    "defaults": (400, {}),
    "early stopping only": (400, {**OFF, "early_stopping_patience": 2}),
    "lower rate only": (400, {**OFF, "reduce_lr_patience": 1}),
    "best epoch only": (400, {**OFF, "keep_best_epoch": True}),
    "off, 800 steps x 8": (800, {**OFF, "epochs": 8}),
    "defaults, 800 steps x 8": (800, {"epochs": 8}),
}

warnings.filterwarnings("ignore", category=FutureWarning)


def pipeline_inputs(output_root: Path) -> tuple[str, str]:
    """(examples URI, transform graph URI) of the latest local run, made if there is none."""
    pipeline = output_root / "pipelines" / PIPELINE_NAME
    if not (pipeline / "Transform").exists():
        import local_runner

        if local_runner.main(["--output-root", str(output_root), "--no-report"]) != 0:
            raise RuntimeError(f"the local pipeline run under {output_root} failed")
    examples = latest_dir(str(pipeline / "CsvExampleGen" / "examples" / "*"))
    return examples, latest_dir(str(pipeline / "Transform" / "transform_graph" / "*"))


def train_once(examples: str, transform_graph: str, train_steps: int, overrides: dict, root: str) -> dict[str, Any]:
    """One ``run_fn`` as the pipeline's Trainer runs it: wall seconds, eval AUC, its record."""
    from tfx.components.trainer.fn_args_utils import FnArgs

    from models import trainer
    from models.hparams import HParams

    fn_args = FnArgs(
        train_files=[os.path.join(examples, "Split-train", "*")],
        eval_files=[os.path.join(examples, "Split-eval", "*")],
        transform_output=transform_graph,
        transform_graph_path=transform_graph,
        serving_model_dir=os.path.join(root, "serving"),
        model_run_dir=os.path.join(root, "model_run"),
        train_steps=train_steps,
        eval_steps=100,
        custom_config=HParams(**overrides).to_custom_config(),
    )
    started = time.perf_counter()
    trainer.run_fn(fn_args)
    seconds = time.perf_counter() - started
    with open(os.path.join(fn_args.model_run_dir, trainer.TRAINING_RECORD)) as f:
        record = json.load(f)
    return {"seconds": seconds, "auc": eval_auc(fn_args.serving_model_dir, fn_args.eval_files), **record}


def eval_auc(serving_dir: str, eval_files: Sequence[str]) -> float:
    """AUC of the exported model on every eval example, labels from its ``label`` signature."""
    import numpy as np
    import tensorflow as tf
    from sklearn.metrics import roc_auc_score

    from models import signatures

    model = tf.saved_model.load(serving_dir)
    files = [f for pattern in eval_files for f in tf.io.gfile.glob(pattern)]
    scores, labels = [], []
    for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096):
        scores.append(model.signatures[signatures.SERVING_SIGNATURE](examples=batch)[signatures.PREDICTION_KEY].numpy())
        labels.append(next(iter(model.signatures[signatures.LABEL_SIGNATURE](examples=batch).values())).numpy())
    return float(roc_auc_score(np.concatenate(labels).ravel(), np.concatenate(scores).ravel()))


def summarise(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per configuration: medians of wall time and AUC, the AUC range, what the schedule did."""
    rows = []
    for name, results in runs.items():
        aucs = [r["auc"] for r in results]
        rows.append(
            {
                "config": name,
                "repeats": len(results),
                "median_seconds": statistics.median(r["seconds"] for r in results),
                "median_auc": statistics.median(aucs),
                "min_auc": min(aucs),
                "max_auc": max(aucs),
                "epochs_run": [r.get("last_epoch", -1) + 1 for r in results],
                "early_stops": sum(r.get("stopped_early_at_epoch") is not None for r in results),
                "best_epochs": [r.get("best_epoch") for r in results],
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| schedule | median s | median AUC | AUC range | epochs run | early stops | best epoch |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['median_seconds']:.1f} | {r['median_auc']:.4f} | "
            f"{r['min_auc']:.4f}-{r['max_auc']:.4f} | {r['epochs_run']} | {r['early_stops']}/{r['repeats']} | "
            f"{r['best_epochs']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    examples, transform_graph = pipeline_inputs(args.output_dir / "run")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.configs}
    for repeat in range(args.repeats):
        for name in args.configs:
            steps, overrides = CONFIGS[name]
            with tempfile.TemporaryDirectory(prefix="schedule-") as root:
                runs[name].append(train_once(examples, transform_graph, steps, overrides, root))
            print(f"repeat {repeat + 1}, {name}: {runs[name][-1]['seconds']:.1f} s, AUC {runs[name][-1]['auc']:.4f}")
    rows = summarise(runs)
    (args.output_dir / "results.json").write_text(json.dumps({"rows": rows, "runs": runs}, indent=1))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
