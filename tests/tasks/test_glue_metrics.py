"""Tests for bert_tf.tasks.glue_metrics on small hand-computed cases."""

import math

import numpy as np
import pytest

from bert_tf.tasks import glue_metrics


def test_accuracy():
    # 3 of 5 equal (positions 0, 1, 3).
    assert glue_metrics.accuracy([0, 1, 1, 0, 1], [0, 1, 0, 0, 0]) == 0.6
    assert glue_metrics.accuracy(np.array([2, 1]), np.array([2, 1])) == 1.0


def test_f1_binary_for_each_positive_class():
    labels, predictions = [1, 1, 1, 0], [1, 0, 1, 1]
    # positive=1: TP 2 (pos 0, 2), FP 1 (pos 3), FN 1 (pos 1): 2*2 / (2*2 + 1 + 1) = 2/3.
    assert glue_metrics.f1_binary(labels, predictions) == pytest.approx(2 / 3)
    # positive=0: TP 0, FP 1 (pos 1), FN 1 (pos 3): 0 / 2 = 0.
    assert glue_metrics.f1_binary(labels, predictions, positive=0) == 0.0
    # No positive label and no positive prediction: undefined, 0.0.
    assert glue_metrics.f1_binary([0, 0], [0, 0]) == 0.0


def test_matthews_binary():
    # TP 2, TN 2, FP 1, FN 1: (2*2 - 1*1) / sqrt(3*3*3*3) = 3/9.
    value = glue_metrics.matthews_corrcoef([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1])
    assert value == pytest.approx(1 / 3)
    assert glue_metrics.matthews_corrcoef([0, 1, 1], [0, 1, 1]) == pytest.approx(1.0)
    assert glue_metrics.matthews_corrcoef([0, 1, 1], [1, 0, 0]) == pytest.approx(-1.0)


def test_matthews_multiclass():
    # n = 6, correct c = 4 (pos 0, 2, 3, 4); true counts t = [2, 2, 2];
    # predicted counts p = [2, 3, 1]; t.p = 12, p.p = 14, t.t = 12:
    # (4*6 - 12) / sqrt((36 - 14) * (36 - 12)) = 12 / sqrt(528) = 0.5222329678670935.
    value = glue_metrics.matthews_corrcoef([0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0])
    assert value == pytest.approx(0.5222329678670935, abs=1e-12)


def test_matthews_undefined_is_zero():
    # A constant prediction column gives 0/0.
    assert glue_metrics.matthews_corrcoef([0, 1, 1], [1, 1, 1]) == 0.0
    assert glue_metrics.matthews_corrcoef([1, 1, 1], [0, 1, 1]) == 0.0
    assert glue_metrics.matthews_corrcoef([1], [1]) == 0.0


def test_pearson():
    # x - 2 = [-1, 0, 1]; y - 5/3 = [-2/3, 1/3, 1/3]; sum xy = 1, sum xx = 2, sum yy = 2/3:
    # 1 / sqrt(4/3) = sqrt(3) / 2.
    assert glue_metrics.pearson([1, 2, 3], [1, 2, 2]) == pytest.approx(math.sqrt(3) / 2)
    # y - 12 = [-11, -4, 15]: 26 / sqrt(2 * 362).
    assert glue_metrics.pearson([1, 2, 3], [1, 8, 27]) == pytest.approx(26 / math.sqrt(724))
    assert glue_metrics.pearson([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # Constant predictions: undefined, 0.0.
    assert glue_metrics.pearson([1.0, 2.0], [3.0, 3.0]) == 0.0


def test_spearman_monotone_is_one():
    # Ranks are equal although the relation is not linear.
    assert glue_metrics.spearman([1, 2, 3], [1, 8, 27]) == pytest.approx(1.0)
    assert glue_metrics.spearman([1, 2, 3], [27, 8, 1]) == pytest.approx(-1.0)


def test_spearman_ties_get_average_ranks():
    # Ranks [1, 2, 3, 4] and [1, 2.5, 2.5, 4]; centred [-1.5, -.5, .5, 1.5] and
    # [-1.5, 0, 0, 1.5]: 4.5 / sqrt(5 * 4.5) = sqrt(0.9).
    assert glue_metrics.spearman([1, 2, 3, 4], [10, 20, 20, 40]) == pytest.approx(math.sqrt(0.9))
    # Ties on both sides: ranks [1.5, 1.5, 3.5, 3.5] and [1, 2.5, 2.5, 4]; centred
    # [-1, -1, 1, 1] and [-1.5, 0, 0, 1.5]: 3 / sqrt(4 * 4.5) = 1 / sqrt(2).
    value = glue_metrics.spearman([0, 0, 1, 1], [0.1, 0.2, 0.2, 0.9])
    assert value == pytest.approx(1 / math.sqrt(2))
    # Unsorted input with a tie: ranks [3, 1.5, 4, 1.5] vs [3, 1, 4, 2]; centred
    # [.5, -1, 1.5, -1] and [.5, -1.5, 1.5, -.5]: 4.5 / sqrt(4.5 * 5) = sqrt(0.9).
    assert glue_metrics.spearman([5, 2, 7, 2], [0.5, 0.1, 0.9, 0.3]) == pytest.approx(
        math.sqrt(0.9))


def test_compute_per_task_keys_and_values():
    cola = glue_metrics.compute("cola", [1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1])
    assert list(cola) == ["matthews_corrcoef", "accuracy"]
    assert cola["matthews_corrcoef"] == pytest.approx(1 / 3)
    assert cola["accuracy"] == pytest.approx(4 / 6)
    for task in ("mrpc", "qqp"):
        result = glue_metrics.compute(task, [1, 1, 1, 0], [1, 0, 1, 1])
        assert list(result) == ["f1", "accuracy"]
        assert result["f1"] == pytest.approx(2 / 3) and result["accuracy"] == 0.5
    for task in ("sst2", "qnli", "rte", "wnli"):
        assert glue_metrics.compute(task, [0, 1, 1, 0], [0, 1, 0, 0]) == {"accuracy": 0.75}
    assert glue_metrics.compute("mnli", [0, 1, 2], [0, 2, 2]) == {"accuracy": pytest.approx(2 / 3)}
    stsb = glue_metrics.compute("stsb", [1.0, 2.0, 3.0], [1.0, 2.0, 2.0])
    assert list(stsb) == ["pearson", "spearman"]
    # Spearman: ranks [1, 2, 3] vs [1, 2.5, 2.5], centred [-1, 0, 1] and [-1, .5, .5]:
    # 1.5 / sqrt(2 * 1.5) = sqrt(3) / 2, the same value as Pearson here.
    assert stsb["pearson"] == pytest.approx(math.sqrt(3) / 2)
    assert stsb["spearman"] == pytest.approx(math.sqrt(3) / 2)
    with pytest.raises(ValueError, match="unknown GLUE task 'ax'"):
        glue_metrics.compute("ax", [0], [0])


@pytest.mark.parametrize("metric", [glue_metrics.accuracy, glue_metrics.f1_binary,
                                    glue_metrics.matthews_corrcoef, glue_metrics.pearson,
                                    glue_metrics.spearman])
def test_empty_and_mismatched_inputs_fail(metric):
    with pytest.raises(ValueError, match=r"^labels and predictions are empty"):
        metric([], [])
    with pytest.raises(ValueError, match=r"^labels and predictions differ in length: "
                                         r"3 labels, 2 predictions$"):
        metric([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match=r"expected 1-D labels and predictions, got shapes "
                                         r"\(2, 1\) and \(2,\)"):
        metric([[0], [1]], [0, 1])


def test_correlations_reject_nan():
    with pytest.raises(ValueError, match=r"^predictions contain NaN or infinity"):
        glue_metrics.pearson([1.0, 2.0], [1.0, float("nan")])
    with pytest.raises(ValueError, match=r"^labels contain NaN or infinity"):
        glue_metrics.spearman([1.0, float("inf")], [1.0, 2.0])
