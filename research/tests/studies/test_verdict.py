"""The pre-registered verdict's hierarchical bootstrap, on synthetic scores with known answers."""

import numpy as np
import pytest

from research.studies.time_to_train import verdict

# Three pretraining runs of five fine-tuning seeds each, in points: run effects of about
# a point, seed scatter of about a point (the previous round's STS-B spreads).
REFERENCE = [[53.1, 52.4, 54.0, 52.9, 53.6], [52.2, 51.5, 53.0, 52.6, 51.9],
             [54.0, 53.2, 54.8, 53.5, 54.4]]


def _shifted(runs, points):
    return [[score + points for score in seeds] for seeds in runs]


def test_identical_arms_give_an_interval_around_zero():
    result = verdict.bootstrap_difference(REFERENCE, REFERENCE, task="stsb")
    assert result.difference == 0.0
    assert result.low < 0 < result.high
    # Symmetric up to the draws: both arms are resampled alike.
    assert result.high == pytest.approx(-result.low, abs=0.25)
    assert verdict.keeps_quality([result], margin=1.0) == (result.low > -1.0)


def test_a_candidate_three_points_worse_fails_and_one_slightly_worse_keeps_quality():
    worse = verdict.bootstrap_difference(_shifted(REFERENCE, -3.0), REFERENCE)
    assert worse.difference == pytest.approx(-3.0)
    assert worse.high < 0 and worse.low < -1.0
    assert not verdict.keeps_quality([worse], margin=1.0)
    # Without scatter the interval is the difference itself.
    flat = [[50.0] * 5] * 3
    tiny = verdict.bootstrap_difference(_shifted(flat, -0.5), flat)
    assert (tiny.low, tiny.difference, tiny.high) == pytest.approx((-0.5, -0.5, -0.5))
    assert verdict.keeps_quality([tiny], margin=1.0)


def test_runs_weigh_the_same_whatever_their_seed_count():
    assert verdict.arm_mean([[10.0, 10.0, 10.0, 10.0], [20.0]]) == 15.0


def test_the_run_level_scatter_widens_the_interval():
    # The same seed scatter around run means that differ by 4 points, or by none.
    seeds = [-0.5, 0.0, 0.5, -0.2, 0.2]
    spread_runs = [[mean + s for s in seeds] for mean in (48.0, 50.0, 52.0)]
    close_runs = [[50.0 + s for s in seeds] for _ in range(3)]
    spread = verdict.bootstrap_difference(spread_runs, spread_runs)
    close = verdict.bootstrap_difference(close_runs, close_runs)
    assert spread.high - spread.low > 3 * (close.high - close.low)


def test_the_interval_is_fixed_by_the_bootstrap_seed():
    candidate = _shifted(REFERENCE, -0.8)
    first = verdict.bootstrap_difference(candidate, REFERENCE, seed=3, resamples=2000)
    again = verdict.bootstrap_difference(candidate, REFERENCE, seed=3, resamples=2000)
    other = verdict.bootstrap_difference(candidate, REFERENCE, seed=4, resamples=2000)
    assert first == again and first != other
    # The interval is the 5th to 95th percentile of the draws: a wider coverage is wider.
    wide = verdict.bootstrap_difference(candidate, REFERENCE, seed=3, resamples=2000,
                                        confidence=0.99)
    assert wide.low < first.low < first.high < wide.high


def test_the_verdict_needs_every_task_and_one_failure_decides():
    reference = {"stsb": REFERENCE, "mrpc": REFERENCE, "rte": REFERENCE}
    tasks = ["stsb", "mrpc", "rte"]
    flat = {task: [[50.0] * 5] * 2 for task in tasks}
    held = verdict.judge({task: _shifted(runs, -0.2) for task, runs in flat.items()}, flat,
                         tasks)
    assert held["keeps_quality"] is True and held["missing"] == []
    assert [d["task"] for d in held["differences"]] == tasks
    pending = verdict.judge({"stsb": flat["stsb"]}, flat, tasks)
    assert pending["keeps_quality"] is None and pending["missing"] == ["mrpc", "rte"]
    failed = verdict.judge({"stsb": _shifted(REFERENCE, -3.0)}, reference, tasks)
    assert failed["keeps_quality"] is False


@pytest.mark.parametrize("candidate, message", [
    ([], "needs at least one pretraining run"),
    ([[50.0], []], "each with at least one fine-tuning score"),
])
def test_empty_arms_are_refused(candidate, message):
    with pytest.raises(ValueError, match=message):
        verdict.bootstrap_difference(candidate, REFERENCE, task="rte")


def test_the_draws_resample_both_levels():
    # One run of one seed per arm has nothing to resample: a point interval.
    one = verdict.bootstrap_difference([[51.0]], [[50.0]])
    assert (one.low, one.high) == (1.0, 1.0)
    # Two runs of one seed each: the candidate's draws are 50, 51 or 52 (mean of two).
    two = verdict.bootstrap_difference([[50.0], [52.0]], [[50.0]], resamples=4000)
    assert (two.low, two.high) == (0.0, 2.0)
    assert np.isclose(two.difference, 1.0)
