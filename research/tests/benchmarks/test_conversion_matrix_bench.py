"""The conversion-matrix benchmark (`python -m research.bench conversion_matrix`)."""

import json
import os

import pytest

from research import portable_paths
from research.benchmarks import conversion_matrix, conversion_matrix_report
from tests.helpers import require

FORMATS = conversion_matrix.FORMATS


def _record(variant, source, target, status="converted", sequence=1e-6, pooled=2e-7,
            error=""):
    record = {"variant": variant, "source": source, "target": target, "status": status,
              "machine": {"cpus": 2, "cpu": "cpu", "cpu_family": "25", "cpu_model": "17"}}
    if status == "converted":
        record.update(reference="ref", sequence_max_abs_diff=sequence,
                      pooled_max_abs_diff=pooled)
    else:
        record["error"] = error
    return record


def test_only_kerashub_may_refuse_and_only_the_exact_gelu():
    expected = conversion_matrix_report.pair_as_expected
    refusal = ("KerasHub's BertBackbone uses the tanh GELU; this encoder's hidden_act is "
               "'gelu', so its outputs would differ")
    assert expected(_record("exact", "hf", "kerashub", "refused", error=refusal), 1e-5)
    assert expected(_record("exact", "kerashub", "hf", "no source"), 1e-5)
    assert not expected(_record("tanh", "hf", "kerashub", "refused", error=refusal), 1e-5)
    assert not expected(_record("exact", "hf", "garden", "refused", error="other"), 1e-5)
    assert not expected(_record("tanh", "hf", "garden", sequence=2e-5), 1e-5)
    assert expected(_record("tanh", "hf", "garden", sequence=1e-5), 1e-5)


def test_the_report_is_a_grid_per_variant(tmp_path):
    pairs = {f"tanh/{s}->{t}": _record("tanh", s, t) for s in FORMATS for t in FORMATS}
    pairs["tanh/hf->garden"] = _record("tanh", "hf", "garden", sequence=0.0, pooled=0.0)
    results = {"pairs": pairs, "formats": list(FORMATS), "parity_bound": 1e-5,
               "model": "m", "settings": {"profile": "ci", "sentences": 4},
               "date": "2026-12-02", "wall_seconds": 3.0}
    conversion_matrix_report.write_report(results, str(tmp_path))
    report = (tmp_path / "report.md").read_text()
    assert ("| from \\ to | bert_tf | Hugging Face | Google TF1 | Model Garden | KerasHub |"
            in report)
    assert "| Hugging Face | 1.0e-06 / 2.0e-07 | 1.0e-06 / 2.0e-07 | 1.0e-06 / 2.0e-07 | " \
           "0 / 0 | 1.0e-06 / 2.0e-07 |" in report
    assert "25 pairs converted; the largest difference 1.0e-06 (bound 1e-05: every pair " \
           "within it)." in report
    assert (tmp_path / conversion_matrix_report.PLOT_FILE).stat().st_size > 0


@pytest.mark.long  # a benchmark's own run: the second test command
def test_the_ci_profile_measures_every_pair_and_resumes(tmp_path):
    from tests import shared_data

    require(shared_data.reference_path(conversion_matrix.REFERENCE_FILE), "reference file")
    require(shared_data.data_path(*conversion_matrix.UNCASED_VOCAB), "shared data file")
    out = str(tmp_path / "matrix")
    # The tanh variant only: every pair converts. The exact GELU's refusals are checked by
    # tests/checkpoints/test_conversion_matrix.py in the fast suite.
    command = ["--output_dir", out, "--profile", "ci", "--variants", "tanh"]
    args = conversion_matrix.build_parser().parse_args(command)
    results = conversion_matrix.run(args, log=lambda message: None)
    pairs = results["pairs"]
    assert len(pairs) == len(FORMATS) ** 2
    for key, record in pairs.items():
        assert key.startswith("tanh/") and record["status"] == "converted", \
            (key, record.get("error"))
        assert max(record["sequence_max_abs_diff"],
                   record["pooled_max_abs_diff"]) <= conversion_matrix.PARITY, key
    assert conversion_matrix_report.all_as_expected(results)
    assert conversion_matrix.main(command) == 0

    # A rerun measures nothing: every pair is done.
    logged = []
    again = conversion_matrix.run(args, log=logged.append)
    assert logged == [f"== tanh: done (in {out}/results.json)"]
    assert again["pairs"] == json.load(open(os.path.join(out, "results.json")))["pairs"]

    # The record names no folder of this machine.
    for name in ("results.json", "report.md"):
        text = open(os.path.join(out, name)).read()
        assert portable_paths.absolute_paths(text) == [], name
    assert os.path.getsize(os.path.join(out, conversion_matrix_report.PLOT_FILE)) > 0
