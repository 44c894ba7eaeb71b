"""bench/measure.py: memory samples attributed to the components that ran at the time."""

from __future__ import annotations

from bench import measure


def test_peak_memory_is_attributed_to_the_component_running_at_the_time():
    from pipeline.run_summary import ComponentRun

    components = [
        ComponentRun("Transform", "complete", 10.0, started=100.0, finished=110.0),
        ComponentRun("Trainer", "complete", 5.0, started=110.5, finished=115.5),
        ComponentRun("Pusher", "cached", 0.0, started=200.0, finished=200.0),
    ]
    samples = [
        (99.0, 9000.0, 8000.0),
        (101.0, 800.0, 600.0),
        (105.0, 1200.0, 1000.0),
        (109.9, 900.0, 1100.0),
        (111.0, 700.0, 500.0),
        (113.0, 800.0, None),
        (115.0, 650.0, 550.0),
    ]
    assert measure.peak_by_component(samples, components) == {"Transform": 1200.0, "Trainer": 800.0, "Pusher": 0.0}
    assert measure.peak_by_component(samples, components, column=2) == {
        "Transform": 1100.0,
        "Trainer": 550.0,
        "Pusher": 0.0,
    }
