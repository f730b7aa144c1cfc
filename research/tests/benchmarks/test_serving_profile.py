"""The serving profile (`python -m research.bench serving_profile`): its arithmetic, CI profile."""

import os

import pytest

from research.benchmarks import serving_profile
from tests.helpers import require_shared


def test_self_time_subtracts_the_nested_ops_on_the_same_thread():
    # A function-call op holding two ops, one of them holding a third; another thread apart.
    events = [(1, 0, 100, "call:StatefulPartitionedCall"),
              (1, 10, 30, "a/MatMul:_MklMatMul"),
              (1, 15, 5, "a/add:AddV2"),
              (1, 50, 20, "b/Tanh:Tanh"),
              (2, 20, 40, "c/Mul:Mul")]
    timed = {name: (duration, own) for name, _, duration, own in
             serving_profile.self_times(events)}
    assert timed == {"call:StatefulPartitionedCall": (100, 50), "a/MatMul:_MklMatMul": (30, 25),
                     "a/add:AddV2": (5, 5), "b/Tanh:Tanh": (20, 20), "c/Mul:Mul": (40, 40)}


def test_the_summary_counts_ops_inside_requests_by_type_and_tokenizer():
    ps = 10 ** 9  # one millisecond
    events = [(1, 0, 4 * ps, serving_profile.REQUEST_EVENT),
              (1, ps, ps, "text_to_ids/WordpieceTokenizeWithOffsets:WordpieceTokenizeWithOffsets"),
              (1, 2 * ps, ps, "encoder/MatMul:_MklFusedMatMul"),
              (1, 5 * ps, 4 * ps, serving_profile.REQUEST_EVENT),
              (1, 6 * ps, 2 * ps, "encoder/MatMul:_MklFusedMatMul"),
              # Outside every request (the profiler's own start): not counted.
              (1, 20 * ps, ps, "setup/Const:Const")]
    summary = serving_profile.summarise_trace(serving_profile.self_times(events), requests=2)
    assert summary["ops_per_request"] == 1.5
    assert summary["op_ms_per_request"] == pytest.approx(2.0)
    assert summary["tokenizer_ms_per_request"] == pytest.approx(0.5)
    assert summary["by_type"]["_MklFusedMatMul"] == {"ops": 1.0, "ms": pytest.approx(1.5)}
    assert list(summary["by_type"])[0] == "_MklFusedMatMul"  # by time, largest first
    with pytest.raises(RuntimeError, match="expected 3 traced requests, found 2"):
        serving_profile.summarise_trace(serving_profile.self_times(events), requests=3)


@pytest.mark.long
def test_ci_profile_traces_every_contender_and_resumes(tmp_path):
    require_shared("glue", "SST-2", "dev.tsv")
    output_dir = str(tmp_path / "profile")
    messages = []
    assert serving_profile.main(["--output_dir", output_dir, "--profile", "ci"]) == 0
    results = serving_profile.run(serving_profile.build_parser().parse_args(
        ["--output_dir", output_dir, "--profile", "ci"]), log=messages.append)
    assert messages == []  # every contender was done: nothing traced again
    assert set(results["contenders"]) == set(serving_profile.CONTENDERS)
    for name, result in results["contenders"].items():
        assert result["ops_per_request"] > 10, name
        assert 0 < result["op_ms_per_request"] < result["mean_request_ms"], name
        assert any("MatMul" in op_type for op_type in result["by_type"]), name
    text, ids = results["contenders"]["export_text"], results["contenders"]["export_ids"]
    # Raw text in runs the tokenizer's ops on top of the encoder's.
    assert text["tokenizer_ops_per_request"] > 0 and ids["tokenizer_ops_per_request"] == 0
    assert text["ops_per_request"] > ids["ops_per_request"]
    report = open(os.path.join(output_dir, "report.md")).read()
    assert "| float export, `serve_token_ids` |" in report
    assert os.path.getsize(os.path.join(output_dir, "time_by_op_type.png")) > 0
