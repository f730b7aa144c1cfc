"""GLUE evaluation metrics in plain numpy.

The metrics match the GLUE paper and the leaderboard: accuracy, F1 of the
positive class (MRPC, QQP), Matthews correlation (CoLA), Pearson and Spearman
correlation (STS-B). Values are fractions, not percentages. numpy only, so
evaluation needs neither scikit-learn nor scipy.
"""

import numpy as np

from bert_tf.data import glue


def _pair(labels, predictions):
    """Both inputs as 1-D arrays of one non-zero length, or a ValueError."""
    labels = np.asarray(labels)
    predictions = np.asarray(predictions)
    if labels.ndim != 1 or predictions.ndim != 1:
        raise ValueError(f"expected 1-D labels and predictions, got shapes "
                         f"{labels.shape} and {predictions.shape}")
    if len(labels) != len(predictions):
        raise ValueError(f"labels and predictions differ in length: "
                         f"{len(labels)} labels, {len(predictions)} predictions")
    if len(labels) == 0:
        raise ValueError("labels and predictions are empty; a metric needs at least one example")
    return labels, predictions


def _finite_floats(labels, predictions):
    """Both inputs as float64 arrays; NaN or infinity is an error naming the input."""
    labels, predictions = _pair(labels, predictions)
    arrays = []
    for name, values in (("labels", labels), ("predictions", predictions)):
        values = values.astype(np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} contain NaN or infinity; expected finite numbers")
        arrays.append(values)
    return arrays


def accuracy(labels, predictions):
    """Fraction of predictions equal to their label."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1_binary(labels, predictions, positive=1):
    """F1 score of the class `positive`: 2 TP / (2 TP + FP + FN).

    0.0 when there is neither a positive label nor a positive prediction
    (scikit-learn's value for this undefined case).
    """
    labels, predictions = _pair(labels, predictions)
    is_label = labels == positive
    is_predicted = predictions == positive
    true_positives = np.sum(is_label & is_predicted)
    denominator = np.sum(is_label) + np.sum(is_predicted)  # = 2 TP + FP + FN
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient, for two or more classes.

    Uses the multiclass form (Gorodkin, 2004) computed from the confusion
    matrix C with n examples, c = trace(C), t = true counts per class and
    p = predicted counts per class:
        (c n - t.p) / sqrt((n^2 - p.p) (n^2 - t.t)).
    For two classes it equals the usual phi coefficient. 0.0 when undefined,
    i.e. when the labels or the predictions hold a single class.
    """
    labels, predictions = _pair(labels, predictions)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    true_ids, predicted_ids = encoded[:len(labels)], encoded[len(labels):]
    true_counts = np.bincount(true_ids, minlength=len(classes)).astype(np.float64)
    predicted_counts = np.bincount(predicted_ids, minlength=len(classes)).astype(np.float64)
    correct = float(np.sum(true_ids == predicted_ids))
    n = float(len(labels))
    covariance = correct * n - true_counts @ predicted_counts
    variance_predicted = n * n - predicted_counts @ predicted_counts
    variance_true = n * n - true_counts @ true_counts
    if variance_predicted == 0 or variance_true == 0:
        return 0.0
    return float(covariance / np.sqrt(variance_predicted * variance_true))


def _correlation(x, y):
    """Pearson correlation of two float arrays; 0.0 when either is constant."""
    x = x - x.mean()
    y = y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    if denominator == 0:
        return 0.0
    # Rounding can push a perfect correlation a hair past 1.
    return float(np.clip((x @ y) / denominator, -1.0, 1.0))


def pearson(labels, predictions):
    """Pearson correlation coefficient.

    0.0 when undefined (labels or predictions constant), like
    `matthews_corrcoef`; scipy returns NaN there.
    """
    return _correlation(*_finite_floats(labels, predictions))


def _average_ranks(values):
    """1-based ranks of `values`; tied values share the mean of their ranks."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    # Sorted positions where a run of equal values starts, plus the end.
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1], [True]]))
    # A run over 0-based positions [start, end) holds ranks start+1 .. end,
    # whose mean is (start + 1 + end) / 2.
    run_ranks = (starts[:-1] + 1 + starts[1:]) / 2.0
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(run_ranks, np.diff(starts))
    return ranks


def spearman(labels, predictions):
    """Spearman rank correlation: Pearson correlation of the average ranks.

    0.0 when undefined (labels or predictions constant).
    """
    labels, predictions = _finite_floats(labels, predictions)
    return _correlation(_average_ranks(labels), _average_ranks(predictions))


_METRICS = {
    "accuracy": accuracy,
    "f1": f1_binary,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def compute(task, labels, predictions):
    """The GLUE metrics of `task`, keyed as in `task_spec(task).metric_names`.

    Args:
      task: one of `bert_tf.data.glue.GLUE_TASKS`.
      labels: gold label ids (floats for STS-B).
      predictions: predicted label ids (floats for STS-B).

    Returns:
      A dict from metric name to value, main metric first. F1 is computed for
      label id 1 ("1": paraphrase / duplicate).
    """
    spec = glue.task_spec(task)
    return {name: _METRICS[name](labels, predictions) for name in spec.metric_names}
