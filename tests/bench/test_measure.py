"""bench/measure.py: memory samples attributed to the components that ran at the time."""

from __future__ import annotations

from bench import measure


def test_peak_memory_is_attributed_to_the_component_running_at_the_time():
    from report.run_summary import ComponentRun

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


def test_medians_of_numbers_and_flags_that_held_in_every_repeat():
    repeats = [
        {"wall_s": 10.0, "steady_reused": True, "component_s": {"Trainer": 3.0}, "output_root": "a"},
        {"wall_s": 30.0, "steady_reused": False, "component_s": {"Trainer": 1.0}, "output_root": "b"},
        {"wall_s": 20.0, "steady_reused": True, "component_s": {"Trainer": 2.0}, "output_root": "c"},
    ]
    assert measure.median_of(repeats) == {
        "wall_s": 20.0,
        "steady_reused": False,
        "component_s": {"Trainer": 2.0},
        "output_root": "a",
    }
    assert measure.median_of([repeats[0], repeats[2]])["steady_reused"] is True
