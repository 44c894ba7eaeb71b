"""The pipeline's components in the order they run (pipeline/pipeline.py), and whose each is.

    CsvExampleGen     TFX's with a change (csv_example_gen.py): a fast local executor, a rolling window of spans
    StatisticsGen     TFX's with a change (statistics_gen.py): copies the statistics CsvExampleGen computed
    SchemaGen         TFX's as shipped (ImportSchemaGen, as shipped, when a contract is given)
    ExampleValidator  TFX's as shipped
    AnomalyGate       the project's own (anomaly_gate.py): stops the run on data that breaks its contract
    Champion          the project's own (champion.py): hands over the champion the pipeline's record names
    DriftGate         the project's own (drift_gate.py, drift.py): stops the run on data that drifted
    Transform         TFX's with a change (transform.py): traces preprocessing_fn once, reads the columns kept
    Tuner, Trainer    TFX's as shipped, or their Vertex AI versions as shipped; with --tfjob the Trainer is
                      TFX's with a change (tfjob.py): it trains in a TFJob of Kubeflow's training operator
    Evaluator         TFX's with a change (evaluator.py): the champion as baseline, never a model against itself
    Pusher            TFX's with a change (pusher.py): records the pushed model as the champion; on Vertex AI,
                      TFX's Vertex Pusher with a change (vertex_pusher.py, registry.py, explanation.py): each
                      push a version of the pipeline's one registry model, then recorded as the champion

ServingExampleGen and ServingStatisticsGen are CsvExampleGen and StatisticsGen again; csv_encoding.py,
csv_statistics.py and spans.py are their helpers.
"""

import models  # noqa: F401  (first: sets the environment TensorFlow reads, see models/__init__.py)
