"""The demo's recipe, change by change (`python -m research.bench demo_recipe`)."""

import json

import pytest

from research.benchmarks import demo_recipe


def test_each_variant_adds_one_change_and_the_last_is_the_packaged_demo():
    def overrides(name):
        return demo_recipe.variant_overrides(name, "full")

    assert "model.encoder.hidden_dropout=0.1" in overrides("paper")
    assert overrides("no_dropout")[-2:] == ["model.encoder.hidden_dropout=0.0",
                                            "model.encoder.attention_dropout=0.0"]
    assert overrides("mixed")[:len(overrides("no_dropout"))] == overrides("no_dropout")
    assert overrides("demo") == []  # the packaged config as it ships
    # The profile's shapes come last, so they win over every variant's own.
    assert demo_recipe.variant_overrides("paper", "ci")[-1] == "data.shuffle_buffer_size=100"


def test_training_accuracy_at_end_averages_the_last_steps_only():
    points = [(100, 0.9), (700, 0.2), (725, 0.4), (800, 0.6)]
    # Steps 725 and 800 fall in the last 100 of 800; 700 does not.
    assert demo_recipe.training_accuracy_at_end(points, 800) == pytest.approx(0.5)
    assert demo_recipe.training_accuracy_at_end(points[:1], 800) is None


@pytest.mark.long
def test_ci_profile_runs_every_variant_reports_and_skips_what_is_finished(tmp_path, capsys):
    out = tmp_path / "demo_recipe"
    assert demo_recipe.main(["--output_dir", str(out), "--profile", "ci"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [v["name"] for v in results["variants"]] == ["paper", "no_dropout", "mixed", "demo"]
    for variant in results["variants"]:
        assert [step for step, _ in variant["curves"]["nsp_accuracy"]] == [2, 4]
        assert 0 < variant["guesses"]["mlm_accuracy"] < 0.5
        assert 0.5 <= variant["guesses"]["nsp_accuracy"] < 1
        assert 0 <= variant["training_batches_at_end"]["nsp_accuracy"] <= 1
    # Every variant read the same corpus and vocabulary.
    vocabularies = {(out / v["name"] / "corpus" / "vocab.txt").read_text()
                    for v in results["variants"]}
    assert len(vocabularies) == 1
    report = (out / "report.md").read_text()
    assert "| the paper's recipe (the demo before) | 4 x 8 |" in report
    assert (out / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert demo_recipe.main(["--output_dir", str(out), "--profile", "ci"]) == 0
    assert capsys.readouterr().out.count(": finished") == 4
