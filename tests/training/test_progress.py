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
