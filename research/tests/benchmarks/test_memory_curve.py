"""The memory curve (`python -m research.bench memory_curve`): a trainer's memory stays flat.

The `long` test trains the benchmark's `ci` profile: 300 steps of a shrunken
BERT-tiny with a checkpoint and an evaluation every 10 steps, so every
cadence point (loop, summaries, checkpoint, evaluation) runs about 20 times
after warm-up. A leak at any of them, or a retrace of a step function, grows
the trainer's resident memory past the bound.
"""

import os

import pytest

from research.benchmarks import memory_curve, memory_curve_report
from tests.helpers import require_shared

# The bounds of the test run, against the anonymous resident memory at the CI profile's
# warm-up step (150, about 655 MB): at the end (the median of the last loop's samples) at
# most 3 % above it, and no sample more than 5 % away from it (the criterion for
# 3,000 steps, through `flat`). The trainer hands freed heap memory back to the OS at
# every checkpoint (every 10 steps here), so memory saws between them: one run peaked at
# +2.1 % mid-run and ended at -0.2 % (2026-11-27); one beside another test process on a
# Zen 1 peaked at +3.3 % and ended at +1.2 % (2026-12-01). A leak grows the end: a
# retrace of the evaluation step at every evaluation (a deliberate regression) grew the
# run's memory by 14 % before traced graphs were freed, by 4.9 % after, and by 10.7 %
# with the heap release (2026-11-27): it fails the end bound.
GROWTH_BOUND = 0.03


def _samples(steps_and_mb):
    # Anonymous memory as given; the shared libraries' pages add 400 MB to the total.
    return [{"t": float(i), "step": step, "anon_mb": mb, "file_mb": 400.0, "rss_mb": mb + 400,
             "hwm_mb": mb + 400} for i, (step, mb) in enumerate(steps_and_mb)]


SETTINGS = {"warmup_step": 100, "train_steps": 300, "steps_per_loop": 50, "tolerance": 0.05}


def test_memory_within_the_tolerance_after_warm_up_is_flat():
    samples = _samples([(0, 10.0), (1, 500.0), (50, 980.0), (100, 1000.0), (100, 1002.0),
                        (150, 1030.0), (250, 990.0), (300, 1004.0)])
    verdict = memory_curve_report.judge(samples, SETTINGS)
    assert verdict["flat"] is True
    assert verdict["start_mb"] == 500.0 and verdict["peak_mb"] == 1030.0
    assert verdict["warmup_mb"] == 1001.0  # median of the samples at step 100
    assert verdict["end_mb"] == pytest.approx(997.0)  # median of the last loop's samples
    assert verdict["max_change"] == pytest.approx(1030 / 1001 - 1)
    total = memory_curve_report.judge(samples, SETTINGS, key="rss_mb")
    assert total["warmup_mb"] == 1401.0 and total["max_change"] == pytest.approx(1430 / 1401 - 1)


@pytest.mark.parametrize("late", [(300, 1060.0), (200, 940.0)])
def test_one_sample_beyond_the_tolerance_is_not_flat(late):
    samples = _samples([(100, 1000.0), (150, 1000.0), late, (300, 1000.0)])
    verdict = memory_curve_report.judge(sorted(samples, key=lambda s: s["step"]), SETTINGS)
    assert verdict["flat"] is False
    assert verdict["max_deviation"] == pytest.approx(0.06)


def test_a_run_stopped_before_its_last_step_is_not_flat_and_one_before_warm_up_unjudged():
    stopped = memory_curve_report.judge(_samples([(100, 1000.0), (200, 1000.0)]), SETTINGS)
    assert stopped["flat"] is False and stopped["reached_step"] == 200
    assert memory_curve_report.judge(_samples([(1, 900.0), (50, 1000.0)]), SETTINGS)["flat"] is None


def test_console_lines_give_their_step():
    lines = {"2026-11-26 20:47:13,889 INFO step 25/200  loss 10.9787  35.9 ex/s": 25,
             "2026-11-26 20:47:36,660 INFO saved checkpoint /tmp/run/ckpt-50\n": 50,
             "2026-11-26 20:47:55,701 INFO eval at step 50: loss 10.5653": 50,
             "2026-11-26 20:46:32,958 INFO step 1: tracing the training step": None,
             "finished at step 200; eval: loss 9.7637": None}
    assert {line: memory_curve.step_of_line(line) for line in lines} == lines


def test_a_warm_up_step_past_the_end_is_refused(capsys):
    code = memory_curve.main(["--output_dir", "unused", "--profile", "ci",
                              "--warmup_step", "300"])
    assert code == 2
    assert "--warmup_step must lie between 0 and --train_steps (300), got 300" in (
        capsys.readouterr().err)


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    require_shared("vocab", "bert-base-uncased-vocab.txt")
    require_shared("corpus", "sotu")
    output_dir = str(tmp_path_factory.mktemp("memory_curve"))
    args = memory_curve.build_parser().parse_args(
        ["--output_dir", output_dir, "--profile", "ci"])
    return args, memory_curve.run(args, log=lambda message: None)


@pytest.mark.long
def test_resident_memory_stays_flat_over_many_checkpoints_and_evaluations(ci_run):
    args, results = ci_run
    verdict, warmup = results["verdict"], results["settings"]["warmup_step"]
    assert results["complete"] and verdict["reached_step"] == 300
    with open(os.path.join(args.output_dir, memory_curve.LOG_FILE)) as f:
        log = f.read()
    # The cadence points ran: a checkpoint and an evaluation every 10 steps.
    assert log.count("saved checkpoint") == 30 and log.count("INFO eval at step") == 30
    assert verdict["samples_after_warmup"] >= 20
    assert verdict["end_change"] <= GROWTH_BOUND, (
        f"resident memory grew more than {GROWTH_BOUND:.0%} from step {warmup} to the end: "
        f"{verdict['warmup_mb']:.0f} MB at step {warmup}, {verdict['min_mb']:.0f}-"
        f"{verdict['max_mb']:.0f} MB after, {verdict['end_mb']:.0f} MB at the end")
    assert verdict["flat"] is True
    report = open(os.path.join(args.output_dir, "report.md")).read()
    assert f"**Anonymous memory after step {warmup}: flat (tolerance 5 %).**" in report
    assert os.path.getsize(os.path.join(args.output_dir, "memory.png")) > 0


@pytest.mark.long
def test_a_rerun_judges_the_finished_measurement_again_without_training(ci_run):
    args, results = ci_run
    messages = []
    again = memory_curve.run(args, log=messages.append)
    assert messages == [f"== memory_curve: done (in {args.output_dir}/results.json)"]
    assert again["verdict"] == results["verdict"]
    assert again["samples"] == results["samples"]
