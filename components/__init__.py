"""The pipeline's components in the order they run (pipeline/pipeline.py), and whose each is.

    CsvExampleGen     TFX's, changed (csv_example_gen.py): a fast local executor, a rolling window of spans
    StatisticsGen     TFX's, changed (statistics_gen.py): copies the statistics CsvExampleGen computed
    SchemaGen         TFX's as shipped (ImportSchemaGen, as shipped, when a contract is given)
    ExampleValidator  TFX's as shipped
    AnomalyGate       the project's own (anomaly_gate.py): stops the run on data that breaks its contract
    Champion          the project's own (champion.py): hands over the champion the pipeline's record names
    DriftGate         the project's own (drift_gate.py, drift.py): stops the run on data that drifted
    Transform         TFX's, changed (transform.py): one trace of preprocessing_fn, reads the columns ExampleGen kept
    Tuner, Trainer    TFX's as shipped, or their Vertex AI versions as shipped; with --tfjob the Trainer is
                      TFX's, changed (tfjob.py): it trains in a TFJob of Kubeflow's training operator
    Evaluator         TFX's, changed (evaluator.py): the champion as baseline, never a model against itself
    Pusher            TFX's, changed (pusher.py): records the pushed model as the champion; on Vertex AI,
                      TFX's Vertex Pusher, changed (vertex_pusher.py, registry.py, explanation.py): each push
                      a version of the pipeline's one registry model, then the champion recorded

ServingExampleGen and ServingStatisticsGen are CsvExampleGen and StatisticsGen again; csv_encoding.py,
csv_statistics.py and spans.py are CsvExampleGen's and StatisticsGen's helpers.
"""

import models  # noqa: F401  (first: sets the environment TensorFlow reads, see models/__init__.py)
