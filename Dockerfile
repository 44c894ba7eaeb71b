# The image every component of the compiled pipeline runs in (Vertex AI Pipelines,
# Kubeflow Pipelines v2, and Dataflow workers via --sdk_container_image).
# The TFX version here must match uv.lock and pipeline.compiler.TFX_VERSION (a test checks).
FROM gcr.io/tfx-oss-public/tfx:1.16.0

# The TFX image runs Keras 2 (tf-keras), as local runs do.
ENV TF_USE_LEGACY_KERAS=1

# The compiled spec refers to user code by module path (models.trainer.run_fn,
# models.preprocessing.preprocessing_fn, components.anomaly_gate...), which import
# runtime.speedups: put the project's packages on the import path. The image's Python is 3.10; this code does not need 3.11.
WORKDIR /pipeline
COPY models/ /pipeline/models/
COPY pipeline/ /pipeline/pipeline/
COPY components/ /pipeline/components/
COPY runtime/ /pipeline/runtime/
ENV PYTHONPATH=/pipeline
