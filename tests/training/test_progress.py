"""The console progress bar: fits the terminal and keeps log lines off its line."""

import io
import logging
import os
import types

import pytest

from bert_tf.training import progress as progress_lib


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


METRICS = {"loss": 7.1234, "mlm_accuracy": 0.1234, "nsp_accuracy": 0.5123}


@pytest.fixture
def narrow_terminal(monkeypatch):
    monkeypatch.setattr(progress_lib.shutil, "get_terminal_size",
                        lambda: os.terminal_size((80, 24)))


def visible_lines(text):
    """What a terminal shows: each `\\r` returns to the line's start, `\\x1b[K` clears the rest."""
    lines = []
    for raw in text.replace("\x1b[K", "").split("\n"):
        lines.append(raw.split("\r")[-1])
    return lines


def test_the_bar_fits_80_columns_and_keeps_throughput_and_eta(narrow_terminal):
    terminal = FakeTerminal()
    bar = progress_lib.Progress(0, 1_000_000, terminal)
    bar.update(5000, METRICS, 1234.5)
    bar.finish()
    line = visible_lines(terminal.getvalue())[0]
    assert len(line) <= 79, line
    assert "ETA" in line and "1234.5 ex/s" in line and "step 5000/1000000" in line


def test_fields_drop_lowest_priority_first():
    fields = [(1, "[####]"), (9, "step 1/2"), (5, "loss 1.0"), (8, "ETA 0m01s")]
    assert progress_lib.fit_fields(fields, 100) == "[####]  step 1/2  loss 1.0  ETA 0m01s"
    assert progress_lib.fit_fields(fields, 30) == "step 1/2  loss 1.0  ETA 0m01s"
    assert progress_lib.fit_fields(fields, 20) == "step 1/2  ETA 0m01s"


def test_log_lines_go_above_the_bar(narrow_terminal):
    terminal = FakeTerminal()
    root = logging.getLogger()
    handler = logging.StreamHandler(terminal)
    handler.setFormatter(logging.Formatter("%(message)s"))
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        bar = progress_lib.Progress(0, 100, terminal)
        bar.update(10, METRICS, 50.0)
        logging.info("saved checkpoint runs/x/ckpt-10")
        bar.update(20, METRICS, 50.0)
        bar.finish()
        assert handler in root.handlers  # restored after the run
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    lines = visible_lines(terminal.getvalue())
    assert lines[0] == "saved checkpoint runs/x/ckpt-10"
    assert "step 20/100" in lines[1] and "ETA" in lines[1]



def test_the_first_step_reports_its_duration_and_the_eta_starts_after_it(monkeypatch):
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(progress_lib, "time", types.SimpleNamespace(monotonic=lambda: clock.now))
    bar = progress_lib.Progress(0, 101, io.StringIO())
    clock.now = 40.0
    first = [text for _, text in bar.fields(1, METRICS, first_step_seconds=39.5)]
    assert first[-1] == "first step 39.5s (tracing, input pipeline)"
    assert not any(text.startswith(("ETA", "ex/s")) for text in first)
    bar.update(1, METRICS, first_step_seconds=39.5)
    clock.now = 50.0
    # 10 steps in the 10 s since the first one: 90 steps to go take 90 s, tracing excluded.
    assert bar.fields(11, METRICS, 80.0)[-1] == (8, "ETA 1m30s")


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


# The demo's shape: 720 steps at length 64, then 80 steps that each cost twice as much.
DEMO_PHASES = (progress_lib.PhasePlan("seq 64", 720, 1.0),
               progress_lib.PhasePlan("seq 128", 80, 2.0))


def test_a_phase_names_itself_on_the_bar_and_in_the_log_line(narrow_terminal, caplog):
    terminal = FakeTerminal()
    plan = progress_lib.RunPlan(DEMO_PHASES, 0, started=0.0)
    bar = progress_lib.Progress(0, 720, terminal, plan=plan)
    bar.update(30, METRICS, 50.0)
    bar.finish()
    line = visible_lines(terminal.getvalue())[0]
    assert len(line) <= 79, line
    assert line.startswith("phase 1/2 seq 64  step 30/720  "), line
    assert "(all phases)" in line
    with caplog.at_level(logging.INFO):
        logged = progress_lib.Progress(
            0, 80, io.StringIO(), plan=progress_lib.RunPlan(DEMO_PHASES, 1, started=0.0))
        logged.update(20, METRICS, 50.0)
    assert caplog.records[-1].getMessage().startswith("phase 2/2 seq 128  step 20/80  loss")
    # A run of one training reports as it always did: no phase, no whole-run ETA.
    with caplog.at_level(logging.INFO):
        progress_lib.Progress(0, 720, io.StringIO()).update(30, METRICS, 50.0)
    alone = caplog.records[-1].getMessage()
    assert alone.startswith("step 30/720  loss") and "phase" not in alone
    assert "all phases" not in alone


def test_the_eta_of_the_first_phase_covers_the_later_phases_and_their_start_up():
    clock = FakeClock(0.0)
    plan = progress_lib.RunPlan(DEMO_PHASES, 0, started=0.0)
    clock.now = 30.0  # the trainer built the model and its input: the bar is created
    bar = progress_lib.Progress(0, 720, io.StringIO(), plan=plan, clock=clock)
    clock.now = 50.0  # the first, traced step ends: 50 s of start-up since the phase began
    bar.update(1, METRICS, first_step_seconds=20.0)
    clock.now = 60.0
    # 10 steps in 10 s: 709 steps left here, then phase 2's 80 steps at 2 s each and a
    # start-up as long as this phase's (50 s): 709 + 160 + 50 = 919 s.
    assert bar.eta(11) == pytest.approx(919.0)
    assert bar.fields(11, METRICS, 80.0)[-1] == (8, "ETA 15m19s (all phases)")
    # The same phase trained alone: its own 709 steps only.
    clock.now = 30.0
    alone = progress_lib.Progress(0, 720, io.StringIO(), clock=clock)
    clock.now = 50.0
    alone.update(1, METRICS, first_step_seconds=20.0)
    clock.now = 60.0
    assert alone.fields(11, METRICS, 80.0)[-1] == (8, "ETA 11m49s")


def test_the_last_phase_estimates_only_its_own_steps():
    clock = FakeClock(1000.0)
    plan = progress_lib.RunPlan(DEMO_PHASES, 1, started=940.0)
    bar = progress_lib.Progress(0, 80, io.StringIO(), plan=plan, clock=clock)
    clock.now = 1010.0
    bar.update(1, METRICS, first_step_seconds=10.0)
    clock.now = 1030.0
    assert bar.eta(11) == pytest.approx(138.0)  # 69 steps at 2 s: no phase follows


def test_a_plan_names_a_lone_phase_by_its_name_and_refuses_bad_phases():
    assert progress_lib.RunPlan(DEMO_PHASES[:1], 0, started=0.0).label == "seq 64"
    assert progress_lib.RunPlan(DEMO_PHASES, 1, started=0.0).label == "phase 2/2 seq 128"
    with pytest.raises(ValueError, match="current phase 2 is not one of the 2 phases"):
        progress_lib.RunPlan(DEMO_PHASES, 2, started=0.0)
    with pytest.raises(ValueError, match="step_cost > 0"):
        progress_lib.PhasePlan("seq 64", 720, 0.0)
