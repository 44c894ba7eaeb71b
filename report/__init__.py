"""The run report: one self-contained HTML page per run (``outputs/report/<pipeline>/<run>/index.html``).

``read`` gathers what a run's artifacts say, ``plots`` draws it, ``page`` lays it out, and
``python -m report`` writes it for any run recorded in ML Metadata.
"""
