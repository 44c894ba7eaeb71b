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
    with pytest.raises(ValueError, match="num_steps"):
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
