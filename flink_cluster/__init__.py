"""A real Apache Flink session cluster on this machine, from Flink's and Beam's published
parts: a JobManager and two TaskManagers, each in its own network namespace, each
TaskManager with a sidecar container of the project's image running Beam's SDK worker pool,
and Beam's Flink job server to submit Python pipelines (``python -m flink_cluster``)."""
