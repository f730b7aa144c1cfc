"""The serving-runtimes benchmark (`python -m research.bench serving_runtimes --profile ci`)."""

import importlib.util
import json
import os

import numpy as np
import pytest

from research.benchmarks import serving_runtimes, serving_runtimes_report
from tests.helpers import REQUIRE_DATA, require_shared

# A benchmark's own run: the second test command (-m long).
pytestmark = pytest.mark.long


def _require_onnx():
    """ONNX Runtime and tf2onnx come with the `test` extra; skip (fail in CI) without them."""
    missing = [name for name in ("onnxruntime", "tf2onnx")
               if importlib.util.find_spec(name) is None]
    if missing:
        message = f"{', '.join(missing)} not installed (pip install -e '.[test]')"
        if REQUIRE_DATA:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    _require_onnx()
    for parts in (("glue", "SST-2", "dev.tsv"), ("glue", "STS-B", "dev.tsv"),
                  ("glue", "MRPC", "dev.tsv"), ("glue", "STS-B", "train.tsv"),
                  ("vocab", "bert-base-uncased-vocab.txt")):
        require_shared(*parts)
    output_dir = str(tmp_path_factory.mktemp("serving_runtimes"))
    args = serving_runtimes.build_parser().parse_args(
        ["--output_dir", output_dir, "--profile", "ci", "--experiments",
         "export_ids_frozen,model_xla"])
    return args, serving_runtimes.run(args, log=lambda message: None)


def test_every_contender_is_timed_on_the_same_ids_and_agrees(bench):
    args, results = bench
    parts = results["parts"]
    assert list(parts) == ["batch_1", "batch_32", "tokenize", "quality", "batch_mates",
                           "onednn_flipped", "finetuned"]
    for name in ("batch_1", "batch_32"):
        summary = parts[name]["summary"]
        assert list(summary) == [*serving_runtimes.CONTENDERS, "export_ids_frozen", "model_xla"]
        assert summary["export_ids"]["ratio_to_export_ids"] == 1.0
        assert all(s["sentences_per_s"] > 0 and s["p95_ms"] >= s["p50_ms"] > 0
                   for s in summary.values())
        rounds = parts[name]["rounds"]["ort_fp32"]
        assert len(rounds) == args.rounds == 2
        assert rounds[0]["sentences"] == args.sentences_per_round
        # The raw-text path pads as the token-id batches were padded: the same outputs.
        assert summary["export_text"]["pooled_max_abs_diff"] <= 1e-6
        assert summary["ort_fp32"]["pooled_max_abs_diff"] <= 1e-5
        assert summary["export_ids_frozen"]["pooled_max_abs_diff"] <= 1e-5
        assert summary["model_xla"]["pooled_max_abs_diff"] <= 1e-4
        # Quantized, yet near: a random model's pooled outputs lie in (-1, 1).
        assert 0 < summary["ort_int8"]["pooled_max_abs_diff"] < 0.2
        assert 0 < summary["export_int8"]["pooled_max_abs_diff"] < 0.2
    assert parts["batch_1"]["batches"] == args.sentences_per_round
    assert parts["batch_32"]["batches"] == 1
    # Padded to the longest sentence of a batch, rounded up to 8.
    assert parts["batch_32"]["mean_padded_length"] % 8 == 0

    tokenize = parts["tokenize"]["batch_sizes"]
    for entry in tokenize.values():
        assert set(entry["summary"]) == {"bert_tf", "hf_tokenizers"}
        assert entry["same_ids_batches"] == entry["batches"]

    quality = parts["quality"]
    assert quality["pairs"] == 16
    variants = quality["variants"]
    assert variants["ort_fp32"]["stsb_spearman"] == pytest.approx(
        variants["export_ids"]["stsb_spearman"], abs=0.01)
    assert -100 <= variants["ort_int8"]["stsb_spearman"] <= 100

    mates = parts["batch_mates"]
    assert mates["sentences"] == 4 and mates["batch_size"] == 32
    assert mates["padded_length_batched"] > mates["mean_padded_length_alone"]
    assert list(mates["variants"]) == list(serving_runtimes.QUALITY_VARIANTS)
    int8 = mates["variants"]["export_int8"]
    # Per-token ranges: the batch a sentence came in does not move its int8 answer.
    assert 0 < int8["vs_float_alone_max_abs_diff"]
    assert int8["alone_vs_batched_max_abs_diff"] < int8["vs_float_alone_max_abs_diff"] / 10
    assert mates["variants"]["export_ids"]["vs_float_alone_max_abs_diff"] == 0

    flipped = parts["onednn_flipped"]
    rewrite = parts["batch_1"]["machine"]["onednn_rewrite"]
    assert flipped["onednn_rewrite"] is (not rewrite)
    assert list(flipped["parts"]) == ["batch_1", "batch_32"]
    for part in flipped["parts"].values():
        assert part["machine"]["onednn_rewrite"] is (not rewrite)
        assert list(part["summary"]) == list(serving_runtimes.FLIPPED_CONTENDERS)
        # The int8 export answers with the rewrite either way, close to float.
        assert 0 < part["summary"]["export_int8"]["pooled_max_abs_diff"] < 0.2
        assert part["summary"]["export_int8"]["sentences_per_s"] > 0

    tasks = parts["finetuned"]["tasks"]
    assert list(tasks) == ["mrpc", "stsb"]
    for task, entry in tasks.items():
        assert entry["dev_examples"] == 32
        variants = entry["variants"]
        assert list(variants) == ["export_ids", "export_int8", "ort_fp32", "ort_int8"]
        # The float ONNX model computes what the SavedModel does; int8 comes near.
        assert variants["ort_fp32"]["score"] == pytest.approx(
            variants["export_ids"]["score"], abs=0.01), task
        assert variants["ort_fp32"]["max_abs_diff_to_export_ids"] <= 1e-4, task
        assert 0 < variants["export_int8"]["max_abs_diff_to_export_ids"] < 0.5, task


def test_the_report_plot_and_a_rerun(bench):
    args, results = bench
    report = open(os.path.join(args.output_dir, "report.md")).read()
    rewrite = "on" if results["parts"]["batch_1"]["machine"]["onednn_rewrite"] else "off"
    flipped = "off" if rewrite == "on" else "on"
    for text in ("## Speed", "## Tokenization alone", "## Quality", "## Fine-tuned task quality",
                 "## Batch-mates", f"oneDNN rewrite {flipped} (second process) |",
                 "| bert_tf int8 export (`--quantize int8`), `serve_token_ids`, "
                 f"oneDNN rewrite {rewrite} | ",
                 "`serve_token_ids` / ONNX Runtime fp32", "onnxruntime"):
        assert text in report
    assert os.path.getsize(os.path.join(args.output_dir, "speed.png")) > 0
    messages = []
    assert serving_runtimes.run(args, log=messages.append) == results
    assert messages == [f"== {name}: done (in {args.output_dir}/results.json)"
                        for name in ("batch_1", "batch_32", "tokenize", "quality", "batch_mates",
                                     "onednn_flipped", "finetuned")]
    with open(os.path.join(args.output_dir, "results.json")) as f:
        assert json.load(f) == results


def test_an_unknown_part_is_refused_naming_it(tmp_path, capsys):
    code = serving_runtimes.main(["--output_dir", str(tmp_path), "--parts", "batch_8"])
    assert code == 2
    assert "--parts: unknown ['batch_8']" in capsys.readouterr().err


def test_contenders_without_the_baseline_are_refused(tmp_path, capsys):
    code = serving_runtimes.main(["--output_dir", str(tmp_path), "--contenders", "ort_fp32"])
    assert code == 2
    assert "--contenders 'ort_fp32': expected some of" in capsys.readouterr().err


def test_an_unknown_experiment_is_refused_naming_it(tmp_path, capsys):
    code = serving_runtimes.main(["--output_dir", str(tmp_path), "--experiments", "xla"])
    assert code == 2
    assert "--experiments: unknown ['xla']" in capsys.readouterr().err


def test_timings_on_a_busy_machine_are_flagged():
    def part(load):
        return {"machine": {"cpus": 2, "load_average_before": 1.0,
                            "load_average_after": load}}

    parts = {"batch_1": part(2.5), "batch_32": part(3.5), "quality": part(9.0)}
    # Quality figures do not depend on the load.
    assert serving_runtimes_report.busy_parts(parts) == ["batch_32"]


def test_mean_pooling_and_cosine_literal():
    sequence = np.array([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]])
    pooled = serving_runtimes.mean_pooled(sequence, np.array([[1, 1, 0]]))
    assert pooled.tolist() == [[2.0, 1.0]]
    similarity = serving_runtimes.cosine(np.array([[1.0, 0.0], [1.0, 1.0]]),
                                         np.array([[0.0, 2.0], [2.0, 2.0]]))
    assert similarity == pytest.approx([0.0, 1.0])
