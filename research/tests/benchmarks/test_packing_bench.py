"""The packing benchmark (`python -m research.bench packing`) on a minutes-long configuration."""

import json
import os

import pytest

from research.benchmarks import packing, packing_report
from tests.helpers import require_shared

# A benchmark's own run: the second test command (-m long).
pytestmark = pytest.mark.long

TINY = ["--preset", "bert_tiny", "--finetune_preset", "bert_tiny", "--repeats", "1",
        "--batches", "2", "--pretrain_rows", "2",
        "--max_train_examples", "64", "--serve_iterations", "2", "--serve_preset", "bert_tiny",
        "--parts", "pretrain_512,finetune_mrpc,serve"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    corpus = require_shared("corpus", "sample_text.txt")
    require_shared("glue", "MRPC", "train.tsv")
    require_shared("glue", "SST-2", "dev.tsv")
    output_dir = str(tmp_path_factory.mktemp("packing"))
    args = packing.build_parser().parse_args(["--output_dir", output_dir, "--corpus", corpus,
                                              *TINY])
    return args, packing.run(args, log=lambda message: None)


def test_packed_rows_carry_more_real_tokens_and_every_part_reports(bench):
    args, results = bench
    parts = results["parts"]
    assert sorted(parts) == ["finetune_mrpc", "pretrain_512", "serve"]
    pretrain = parts["pretrain_512"]
    tokens = {name: rounds[0]["tokens"] for name, rounds in pretrain["rounds"].items()}
    # The same rows per batch: packed rows hold the short documents' instances together.
    assert tokens["ours_packed"] > tokens["ours_padded"] == tokens["garden_padded"]
    for part in ("pretrain_512", "finetune_mrpc"):
        summary = parts[part]["summary"]
        assert summary["garden_padded"]["ratio_to_garden_padded"] == pytest.approx(1.0)
        assert all(s["rate"] > 0 for s in summary.values())
    finetune = parts["finetune_mrpc"]
    examples = finetune["rounds"]["ours_packed"][0]["examples"]
    # MRPC pairs share 128-token rows: more examples than rows per batch.
    assert examples > 2 * finetune["packed_rows_per_batch"]
    assert set(parts["serve"]["batches"]) == {"1", "32"}
    report = open(os.path.join(args.output_dir, "report.md")).read()
    for heading in ("### pretrain_512", "### finetune_mrpc", "### serve"):
        assert heading in report
    assert os.path.getsize(os.path.join(args.output_dir, "ratios.png")) > 0


def test_a_rerun_skips_finished_parts(bench):
    args, results = bench
    messages = []
    again = packing.run(args, log=messages.append)
    assert again == results
    assert messages == [f"== {name}: done (in {args.output_dir}/results.json)"
                        for name in ("pretrain_512", "finetune_mrpc", "serve")]
    with open(os.path.join(args.output_dir, "results.json")) as f:
        assert json.load(f) == results


def test_an_unknown_part_is_refused_naming_it(tmp_path, capsys):
    code = packing.main(["--output_dir", str(tmp_path), "--parts", "pretrain_256"])
    assert code == 2
    assert "--parts: unknown ['pretrain_256']" in capsys.readouterr().err


def _rounds(seconds_by_runner, count_key):
    return {name: [{"seconds": s, count_key: 10.0, "steps": 2} for s in seconds]
            for name, seconds in seconds_by_runner.items()}


def test_packed_to_unpacked_is_a_median_of_per_round_ratios(tmp_path):
    # Per-round packed / unpacked: 2, 4, 0.5 (median 2); the two median rates are equal (1x).
    seconds = {"ours_packed": [1.0, 2.0, 4.0], "garden_padded": [4.0, 4.0, 4.0]}
    finetune_rounds = _rounds({**seconds, "ours_dynamic": [2.0, 8.0, 2.0]}, "examples")
    pretrain_rounds = _rounds({**seconds, "ours_padded": [2.0, 8.0, 2.0]}, "tokens")
    assert packing.median_ratio(finetune_rounds, "examples", "ours_packed",
                                "ours_dynamic") == 2.0
    parts = {
        "pretrain_512": {"rows": 8, "seq_length": 512, "rounds": pretrain_rounds,
                         "summary": packing.summarise(pretrain_rounds, "tokens",
                                                      "garden_padded"),
                         "step_matmul_flops": {"packed": 1e9, "padded": 1e9},
                         "fp32_matmul_peak_gflops": 100.0},
        "finetune_mrpc": {"examples_per_batch": 32, "packed_rows_per_batch": 15,
                          "rounds": finetune_rounds,
                          "summary": packing.summarise(finetune_rounds, "examples",
                                                       "garden_padded")}}
    summary = parts["finetune_mrpc"]["summary"]
    assert summary["ours_packed"]["rate"] == summary["ours_dynamic"]["rate"] == 5.0
    packing_report.write_report({"parts": parts}, str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    assert "packed / our padded rows: 2.00x" in report
    assert "packed / our dynamic padding: 2.00x" in report
    assert "Ours packed / Model Garden: 2.00x" in report  # 4 / 2, 4 / 1 (median), 4 / 4
