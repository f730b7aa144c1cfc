"""Tests for bert_tf.tasks.squad_metrics: the official SQuAD EM / F1 semantics."""

import math

import pytest

from bert_tf.data import squad
from bert_tf.tasks import squad_metrics


def _example(qas_id, *golds, impossible=False):
    return squad.SquadExample(qas_id, "?", "context", tuple((g, 0) for g in golds),
                              is_impossible=impossible)


@pytest.mark.parametrize("text, expected", [
    ("The  Eiffel Tower!", "eiffel tower"),
    ("an apple, a pear and THE plum.", "apple pear and plum"),
    ("Theatre anthem", "theatre anthem"),  # articles only as whole words
    ("U.S. (1,000)", "us 1000"),
    ("  \t", ""),
])
def test_normalize_answer(text, expected):
    assert squad_metrics.normalize_answer(text) == expected


def test_exact_match():
    assert squad_metrics.exact_match("the Eiffel tower", "Eiffel Tower!") == 1.0
    assert squad_metrics.exact_match("Eiffel", "Eiffel Tower") == 0.0


@pytest.mark.parametrize("prediction, gold, expected", [
    ("the cat sat on the mat", "a cat sat on a hat", 0.75),  # 3 of 4 tokens each way
    ("x y y", "y y y z", 4 / 7),  # common 2: precision 2/3, recall 1/2
    ("Eiffel Tower", "the eiffel tower!", 1.0),
    ("cat", "dog", 0.0),
    ("", "", 1.0),
    ("the", "", 1.0),  # both normalize to nothing
    ("", "Paris", 0.0),
    ("Paris", "", 0.0),
])
def test_f1(prediction, gold, expected):
    assert math.isclose(squad_metrics.f1(prediction, gold), expected)


def test_v1_takes_the_best_gold_and_counts_missing_predictions_as_wrong():
    examples = [_example("a", "Denver Broncos", "the Broncos"), _example("b", "blue whale"),
                _example("c", "1990")]
    result = squad_metrics.evaluate(examples, {"a": "Broncos", "b": "whale"})
    # a: EM 1 (vs "the Broncos"); b: EM 0, F1 2/3; c: missing -> 0.
    assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(500 / 9),
                      "total": 3, "missing": 1}


def test_v1_example_without_gold_answer_is_an_error():
    with pytest.raises(ValueError, match="'t1' has no gold answer"):
        squad_metrics.evaluate([_example("t1")], {"t1": "x"})


V2_EXAMPLES = [_example("q1", "Paris"), _example("q2", "blue whale"),
               _example("q3", impossible=True), _example("q4", impossible=True),
               _example("q5", "red")]
V2_PREDICTIONS = {"q1": "Paris", "q2": "whale", "q3": "London", "q4": "", "q5": "green"}
V2_NULL_ODDS = {"q1": -2.0, "q2": 0.5, "q3": 1.5, "q4": 3.0, "q5": 2.0}


def test_v2_has_answer_and_no_answer_splits():
    result = squad_metrics.evaluate(V2_EXAMPLES, V2_PREDICTIONS)
    # EM: q1, q4. F1: 1 + 2/3 + 0 + 1 + 0.
    assert result == pytest.approx({
        "exact_match": 40.0, "f1": 800 / 15, "total": 5, "missing": 0,
        "HasAns_exact": 100 / 3, "HasAns_f1": 500 / 9, "HasAns_total": 3,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})


def test_v2_null_odds_threshold_and_best_thresholds():
    result = squad_metrics.evaluate(V2_EXAMPLES, V2_PREDICTIONS, V2_NULL_ODDS, null_threshold=1.0)
    # Odds > 1 answer "": q3 and q4 become right, q5 stays wrong.
    assert result["exact_match"] == pytest.approx(60.0)
    assert result["f1"] == pytest.approx(1100 / 15)
    assert result["NoAns_exact"] == 100.0 and result["HasAns_exact"] == pytest.approx(100 / 3)
    # Sweep from "all null" (2 right): q1 (-2.0) +1 -> 3, q2 (0.5) +0 / +2/3,
    # q3 (1.5) -1, q5 +0, q4 +0. Best EM 3/5 at -2.0, best F1 (3 + 2/3)/5 at 0.5.
    assert result["best_exact"] == pytest.approx(60.0) and result["best_exact_thresh"] == -2.0
    assert result["best_f1"] == pytest.approx(1100 / 15) and result["best_f1_thresh"] == 0.5


def test_v2_gold_answers_normalizing_to_nothing_are_dropped():
    # Gold "the" is dropped, so a prediction scores against "Paris" only.
    examples = [_example("q1", "the", "Paris"), _example("q2", impossible=True)]
    result = squad_metrics.evaluate(examples, {"q1": "a", "q2": "a"})
    assert result["HasAns_exact"] == 0.0 and result["NoAns_exact"] == 100.0


def test_v2_missing_prediction_is_wrong_and_null_odds_must_cover_predictions():
    examples = V2_EXAMPLES + [_example("q6", impossible=True)]
    result = squad_metrics.evaluate(examples, V2_PREDICTIONS, V2_NULL_ODDS)
    assert result["total"] == 6 and result["missing"] == 1
    assert result["NoAns_total"] == 3 and result["NoAns_exact"] == pytest.approx(200 / 3)
    assert result["best_exact"] == pytest.approx(50.0)  # 3 right of 6
    with pytest.raises(ValueError, match="null_odds lacks 1 predicted question"):
        squad_metrics.evaluate(V2_EXAMPLES, V2_PREDICTIONS, {"q1": 0.0, "q2": 0.0, "q3": 0.0,
                                                             "q4": 0.0})


def test_gold_predictions_score_100_on_real_dev(shared_file):
    examples, _ = squad.read_squad(shared_file("squad", "dev-v1.1.json"))
    predictions = {e.qas_id: e.answers[-1][0] for e in examples}
    result = squad_metrics.evaluate(examples, predictions)
    assert result == {"exact_match": 100.0, "f1": 100.0, "total": 10570, "missing": 0}
    # Answering every question with its title ("Super_Bowl_50", ...) is almost always wrong.
    titles = squad_metrics.evaluate(examples, {e.qas_id: e.title for e in examples})
    assert titles["exact_match"] < 1.0
