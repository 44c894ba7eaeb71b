"""The pipeline's benchmark: at several data sizes, end-to-end time, memory (process tree
and per component), seconds per component, the cached reruns, and whether the Trainer
waits on its input pipeline; beside it, TFX's own taxi template on the same data in the
same session, for ratios. It measures only and changes nothing in the pipeline.

    make bench BENCH_ARGS="--sizes 1,10 --repeats 1"   # writes outputs/bench/results.{json,md}
    python -m bench --help
    python -m bench --sizes 1 --no-template            # without the template beside it

Modules: ``generate`` (the data), ``measure`` (runs and their figures), ``template``
(TFX's taxi template), ``report`` (the Markdown table), ``__main__`` (the command line).
"""
