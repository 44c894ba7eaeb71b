import pytest

from models import budget


@pytest.mark.parametrize(
    ("train_steps", "epochs", "expected"),
    [(400, 4, (4, 100)), (40, 2, (2, 20)), (41, 2, (2, 21)), (3, 4, (3, 1)), (1, 1, (1, 1))],
)
def test_a_given_step_count_is_cut_into_the_given_epochs(train_steps, epochs, expected):
    got = budget.from_steps(train_steps, epochs)
    assert (got.epochs, got.steps_per_epoch) == expected
    assert train_steps <= got.max_steps < train_steps + got.epochs
    assert "--train-steps" in got.reason


@pytest.mark.parametrize("steps", [0, -1])
def test_a_given_step_count_must_be_positive(steps):
    with pytest.raises(ValueError, match="--train-steps must be a positive number of steps"):
        budget.from_steps(steps, 2)


@pytest.mark.parametrize("rows", [300, 1_000, 10_000, 100_000, 1_000_000, 3_000_000])
@pytest.mark.parametrize("batch", [64, 256, 1024])
def test_the_data_budget_sees_between_its_floor_and_its_caps(rows, batch):
    got = budget.from_data(rows, batch)
    seen = got.max_steps * batch
    # Rounded up to whole steps and epochs: at most one epoch's worth of extra rows.
    slack = got.steps_per_epoch * batch
    assert seen >= min(budget.MAX_ROWS_SEEN, max(budget.MIN_ROWS_SEEN, budget.MAX_PASSES * rows))
    assert seen < min(budget.MAX_ROWS_SEEN, max(budget.MIN_ROWS_SEEN, budget.MAX_PASSES * rows)) + slack
    assert got.train_rows == rows and f"{rows:,} training rows" in got.reason


def test_an_epoch_is_a_pass_unless_that_is_too_short_or_too_long():
    # A mid-sized split: one pass per epoch.
    mid = budget.from_data(100_000, 256)
    assert mid.steps_per_epoch == 391 and mid.epochs >= budget.MIN_EPOCHS
    # A small one: several passes per epoch (each epoch's validation and checkpoints cost time).
    small = budget.from_data(10_000, 256)
    assert small.steps_per_epoch == budget.MIN_EPOCH_STEPS > 40 and small.epochs > budget.MIN_EPOCHS
    # A tiny one: at most MAX_EPOCH_PASSES passes between two decisions (2 steps a pass here).
    tiny = budget.from_data(300, 256)
    assert tiny.steps_per_epoch == budget.MAX_EPOCH_PASSES * 2 < budget.MIN_EPOCH_STEPS
    # A large one: less than a pass per epoch, so the schedule decides several times.
    large = budget.from_data(2_000_000, 256)
    assert large.steps_per_epoch < 2_000_000 / 256 and large.epochs >= budget.MIN_EPOCHS


def test_the_budget_grows_with_the_data_until_its_cap():
    rows = (100, 1_000, budget.MIN_ROWS_SEEN // budget.MAX_PASSES * 2, budget.MAX_ROWS_SEEN // budget.MAX_PASSES)
    budgets = [budget.from_data(n, 256) for n in (*rows, 500_000, 5_000_000)]
    # Non-decreasing, but for whole epochs' rounding.
    for smaller, larger in zip(budgets, budgets[1:], strict=False):
        assert larger.max_steps > smaller.max_steps - smaller.steps_per_epoch
    assert budgets[0].max_steps <= budgets[1].max_steps < budgets[2].max_steps < budgets[3].max_steps
    assert budgets[-1].max_steps == budgets[-2].max_steps


@pytest.mark.parametrize(("rows", "batch"), [(0, 256), (10, 0)])
def test_no_rows_or_no_batch_is_refused(rows, batch):
    with pytest.raises(ValueError, match="rows|batch"):
        budget.from_data(rows, batch)


def test_rows_are_counted_only_without_a_step_count():
    counted = []

    def count():
        counted.append(True)
        return 5_000

    assert budget.choose(400, 4, 256, count).max_steps == 400 and not counted
    assert budget.choose(None, 4, 256, count).train_rows == 5_000 and counted


def test_the_schedule_waits_a_quarter_of_the_budget_before_it_may_stop():
    assert budget.from_data(300, 256).warmup_epochs == budget.from_data(300, 256).epochs // 4 >= 2
    assert budget.from_data(2_000_000, 256).warmup_epochs == 1
    mid = budget.from_data(10_000, 256)
    assert mid.to_record()["warmup_epochs"] == mid.epochs // 4 > 1


@pytest.mark.parametrize("cap", [300_000, budget.MAX_ROWS_SEEN, 10_000_000])
def test_large_data_sees_at_most_the_chosen_number_of_rows_and_says_which_flag_sets_it(cap):
    rows, batch = 10_000_000, 256
    got = budget.from_data(rows, batch, max_rows_seen=cap)
    assert cap <= got.rows_seen == got.max_steps * batch < cap + got.steps_per_epoch * batch
    assert got.capped_at == cap and "--hparam max_rows_seen" in got.reason
    assert got.to_record()["rows_seen"] == got.rows_seen and got.to_record()["capped_at"] == cap


def test_a_cap_above_what_the_data_needs_does_not_bind():
    got = budget.from_data(10_000, 256, max_rows_seen=10_000_000)
    assert got.capped_at is None and got.rows_seen < 10_000_000 and "max_rows_seen" not in got.reason


def test_a_cap_below_one_batch_is_a_budget_of_zero_steps_and_is_refused_with_its_fix():
    with pytest.raises(ValueError, match=r"max_rows_seen=100 is less than one global batch \(256 rows\).*at least 256"):
        budget.from_data(1_000_000, 256, max_rows_seen=100)


def _record(budget_: budget.Budget, epochs_run: int, batch: int) -> dict:
    """A training record as run_fn writes it, for ``epochs_run`` epochs of ``budget_``."""
    return {
        "budget": budget_.to_record(),
        "steps_per_epoch": budget_.steps_per_epoch,
        "global_batch": batch,
        "last_epoch": epochs_run - 1,
    }


def test_what_the_model_saw_is_said_with_the_flag_that_shows_it_more_when_the_cap_bound():
    capped = budget.from_data(10_000_000, 256)
    said = budget.data_seen(_record(capped, capped.epochs, 256))
    seen = capped.epochs * capped.steps_per_epoch * 256
    assert said == (
        f"the model saw {seen:,} of the 10,000,000 training rows ({seen / 10_000_000:.0%}) "
        f"(capped at {budget.MAX_ROWS_SEEN:,}); --hparam max_rows_seen=10000000 would show it every row once"
    )
    # Stopped early after two epochs: what it saw, not what the budget allowed.
    early = budget.data_seen(_record(capped, 2, 256))
    assert f"saw {2 * capped.steps_per_epoch * 256:,} of" in early


def test_small_data_is_said_in_passes_without_a_flag():
    small = budget.from_data(10_000, 256)
    said = budget.data_seen(_record(small, small.epochs, 256))
    assert said.startswith(f"the model saw {small.rows_seen:,} rows, ") and "passes over the 10,000" in said
    assert "max_rows_seen" not in said
    assert budget.data_seen({}) is None and budget.data_seen({"budget": {}, "last_epoch": 0}) is None
