"""The parity harness (`python -m research.bench parity`) on tiny shapes.

Ours must match Model Garden's `BertPretrainerV2` step for step with dropout
off, stay close with dropout on, and the deliberately wrong variants of ours
(the negative controls) must be reported as diverging.
"""

import os

import numpy as np
import pytest

from research.benchmarks import parity
from tests.helpers import require_shared

# A benchmark's own run: the second test command (-m long).
pytestmark = pytest.mark.long

TINY = ["--num_layers", "2", "--hidden_size", "32", "--num_heads", "2",
        "--intermediate_size", "64", "--seq_length", "32", "--max_predictions", "5",
        "--batch_size", "4", "--exact_steps", "10", "--dropout_steps", "20",
        "--checkpoint_every", "10", "--smoothing", "5", "--prose", ""]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    require_shared("corpus", "sample_text.txt")
    require_shared("vocab", "bert-base-uncased-vocab.txt")
    output_dir = str(tmp_path_factory.mktemp("parity"))
    args = parity.build_parser().parse_args(["--output_dir", output_dir, *TINY])
    return args, parity.run(args, log=lambda message: None)


def test_ours_matches_model_garden_step_for_step(harness):
    args, results = harness
    verdict = results["exact"]["verdicts"]["ours"]
    assert verdict["parity"], (verdict["max_loss_rel_gap"], verdict["worst_weight"])
    assert verdict["max_loss_rel_gap"] <= 1e-4
    losses = results["exact"]["losses"]
    assert len(losses["ours"]["loss"]) == len(losses["garden"]["loss"]) == 10
    # The stacks trained: the loss starts near log(V) + log(2) and falls.
    first = losses["garden"]["loss"][0]
    assert abs(first - np.log(30522) - np.log(2)) < 0.5
    assert losses["garden"]["loss"][-1] < first
    assert results["dropout"]["verdict"]["parity"]
    assert results["passed"] == {"parity": True, "controls_diverge": True}


def test_negative_controls_are_reported_as_diverging(harness):
    _, results = harness
    verdicts = results["exact"]["verdicts"]
    # LayerNorm decay: losses barely move in 10 steps, the LayerNorm weights do.
    assert not verdicts["ln_decay"]["parity"]
    assert not verdicts["ln_decay"]["weights_agree"]
    assert "LayerNorm" in verdicts["ln_decay"]["worst_weight"]
    # Token-mean MLM loss: wrong from the first step.
    assert not verdicts["mlm_token_mean"]["losses_agree"]
    assert verdicts["mlm_token_mean"]["first_step_over_loss_rtol"] == 1


def test_writes_report_and_plots_and_a_rerun_skips_finished_parts(harness):
    args, results = harness
    for name in ("results.json", "report.md", "exact_losses.png", "dropout_mlm.png"):
        assert os.path.getsize(os.path.join(args.output_dir, name)) > 0
    finished = os.path.join(args.output_dir, "exact", "ours.npz")
    before = os.path.getmtime(finished)
    again = parity.run(args, log=lambda message: None)
    assert os.path.getmtime(finished) == before
    assert again["exact"]["losses"] == results["exact"]["losses"]
    assert again["dropout"]["losses"] == results["dropout"]["losses"]


def test_smoothed_curves_judged_from_the_first_full_window():
    args = parity.build_parser().parse_args(["--output_dir", "unused", "--smoothing", "2"])
    np.testing.assert_allclose(parity.trailing_mean([1.0, 3.0, 5.0, 9.0], 2), [1, 2, 4, 7])
    close = parity.judge_curves([10.0, 10.0, 10.1, 10.1], [10.0, 10.0, 10.0, 10.0], args)
    assert close["parity"] and close["max_rel_gap"] == pytest.approx(0.01)
    # A 3 % gap on the first step only is outside the judged range (no full window yet)...
    early = parity.judge_curves([10.3, 10.0, 10.0], [10.0, 10.0, 10.0], args)
    assert early["parity"]
    # ...but a lasting one is caught.
    late = parity.judge_curves([10.0, 10.0, 10.6, 10.6], [10.0, 10.0, 10.0, 10.0], args)
    assert not late["parity"] and late["step_of_max"] == 4
