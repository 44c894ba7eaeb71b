"""The Vertex AI rehearsal: the compiled pipeline job executed on this machine as Vertex AI
Pipelines executes it (``kubeflow_runner.py --rehearse``)."""
