"""The packing benchmark (`python -m research.bench packing`) on a minutes-long configuration."""

import json
import os

import pytest

from research.benchmarks import packing
from tests.helpers import require_shared

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


@pytest.mark.slow
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


@pytest.mark.slow
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
