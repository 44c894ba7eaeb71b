"""The pipeline's benchmarks. ``python -m bench`` measures the pipeline at several data sizes
(time, memory, seconds per component, the cached reruns, the Trainer's input rate) beside
TFX's taxi template; the other modules each measure one question (quality, budget, drift,
replay, ...). They measure only and change nothing in the pipeline (docs/performance.md).
"""
