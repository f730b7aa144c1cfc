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
    assert overrides("mask_30")[:len(overrides("batch64"))] == overrides("batch64")
    assert overrides("demo") == []  # the packaged configs as they ship
    assert [v.two_phases for v in demo_recipe.VARIANTS] == [False] * 5 + [True]
    # The profile's shapes come last, so they win over every variant's own.
    assert demo_recipe.variant_overrides("paper", "ci")[-1] == "data.shuffle_buffer_size=100"


def test_the_one_phase_variants_start_from_the_first_demo_at_length_128():
    """With the packaged phase 1 under them, the overrides give back the first demo's config."""
    from bert_tf import demo, tasks

    _, experiment = tasks.load_experiment(demo.CONFIG,
                                          demo_recipe.variant_overrides("batch64", "full"))
    data, trainer = experiment.data, experiment.trainer
    assert (data.max_seq_length, data.max_predictions_per_seq, data.masked_lm_prob) == \
        (128, 20, 0.15)
    assert (trainer.global_batch_size, trainer.train_steps, trainer.eval_every) == (64, 800, 100)


def test_tokens_and_the_step_nsp_leaves_chance_count_across_phases():
    phases = [{"first_step": 0, "train_steps": 720, "batch_size": 128, "length": 64,
               "guesses": {"nsp_accuracy": 0.52}},
              {"first_step": 720, "train_steps": 80, "batch_size": 64, "length": 128,
               "guesses": {"nsp_accuracy": 0.60}}]
    assert demo_recipe.tokens_seen(phases, 90) == 90 * 128 * 64
    assert demo_recipe.tokens_seen(phases, 760) == 720 * 128 * 64 + 40 * 64 * 128
    assert demo_recipe.schedule(phases) == "720 x 128 at 64, then 80 x 64 at 128"
    # Each evaluation against its own phase's guess: 0.58 clears phase 1's, not phase 2's.
    record = {"phases": phases,
              "curves": {"nsp_accuracy": [[90, 0.55], [720, 0.58], [760, 0.62], [800, 0.66]]}}
    assert demo_recipe.nsp_leaves_chance(record) == 720
    record["curves"]["nsp_accuracy"][1][1] = 0.56
    assert demo_recipe.nsp_leaves_chance(record) == 800


def test_training_accuracy_at_end_averages_the_last_steps_only():
    points = [(100, 0.9), (700, 0.2), (725, 0.4), (800, 0.6)]
    # Steps 725 and 800 fall in the last 100 of 800; 700 does not.
    assert demo_recipe.training_accuracy_at_end(points, 800) == pytest.approx(0.5)
    assert demo_recipe.training_accuracy_at_end(points[:1], 800) is None


@pytest.mark.long
def test_ci_profile_runs_its_variants_reports_and_skips_what_is_finished(tmp_path, capsys):
    # One of the six variants (each a demo process), the two-phase demo: the unit tests
    # above check every variant's overrides; every row of the report is built alike.
    out = tmp_path / "demo_recipe"
    command = ["--output_dir", str(out), "--profile", "ci", "--variants", "demo"]
    assert demo_recipe.main(command) == 0
    results = json.loads((out / "results.json").read_text())
    (variant,) = results["variants"]
    assert variant["name"] == "demo"
    assert [step for step, _ in variant["curves"]["nsp_accuracy"]] == [2, 4, 6, 8]
    assert 0 < variant["guesses"]["mlm_accuracy"] < 0.5
    assert 0.5 <= variant["guesses"]["nsp_accuracy"] < 1
    assert 0 <= variant["training_batches_at_end"]["nsp_accuracy"] <= 1
    # The variant read the corpus and vocabulary built once for every variant.
    assert (out / "demo" / "corpus" / "vocab.txt").read_text() == \
        (out / "corpus" / "vocab.txt").read_text()
    report = (out / "report.md").read_text()
    assert "| 4 x 8 at 32, then 4 x 8 at 32 |" in report
    assert (out / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert demo_recipe.main(command) == 0
    assert capsys.readouterr().out.count(": finished") == 1
