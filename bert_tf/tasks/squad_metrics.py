"""SQuAD exact match and F1 with the official scorers' semantics.

Follows evaluate-v1.1.py and evaluate-v2.0.py: answers are compared after
`normalize_answer`; each question scores the maximum over its gold answers;
for v2.0, gold answers that normalise to nothing are dropped and an
impossible question's only gold answer is "", and the "null odds" of each
question (how much the model prefers no answer) give the no-answer
threshold sweep (best_exact / best_f1). Scores are percentages.
"""

import collections
import logging
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """Lower-cases, removes punctuation and the articles a/an/the, collapses spaces."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction, gold):
    """1.0 when the normalized texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction, gold):
    """Token-level F1 of the normalized texts.

    v2.0 semantics when a side has no token: 1.0 if both are empty, else 0.0.
    """
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted)
    recall = common / len(expected)
    return 2 * precision * recall / (precision + recall)


def evaluate(examples, predictions, null_odds=None, null_threshold=1.0):
    """EM and F1 of `predictions` ({qas_id: text}) against `examples`.

    A question without a prediction scores 0 and is counted in "missing".
    The result is v1.1's {"exact_match", "f1", "total", "missing"}; when any
    example is impossible (v2.0) it adds HasAns_/NoAns_ exact, f1 and total.
    With `null_odds` ({qas_id: float}, required for every predicted
    question), questions whose odds exceed `null_threshold` count as
    answered "" (the official --na-prob-thresh) and the result adds
    best_exact, best_exact_thresh, best_f1, best_f1_thresh: the scores at
    the best threshold over the observed odds.
    """
    version_2 = any(e.is_impossible for e in examples)
    has_answer = {}
    exact, token_f1 = {}, {}  # raw scores of predicted questions
    missing = []
    for example in examples:
        golds = _gold_answers(example, version_2)
        has_answer[example.qas_id] = not example.is_impossible
        if example.qas_id not in predictions:
            missing.append(example.qas_id)
            continue
        prediction = predictions[example.qas_id]
        exact[example.qas_id] = max(exact_match(prediction, g) for g in golds)
        token_f1[example.qas_id] = max(f1(prediction, g) for g in golds)
    if missing:
        logging.warning("SQuAD evaluation: %d of %d questions have no prediction (first: %s); "
                        "they count as wrong", len(missing), len(examples), missing[0])
    if null_odds is not None:
        absent = [qid for qid in exact if qid not in null_odds]
        if absent:
            raise ValueError(f"null_odds lacks {len(absent)} predicted question(s), "
                             f"first: {absent[0]!r}")
        exact_final = _apply_null_threshold(exact, null_odds, has_answer, null_threshold)
        f1_final = _apply_null_threshold(token_f1, null_odds, has_answer, null_threshold)
    else:
        exact_final, f1_final = exact, token_f1
    all_ids = list(has_answer)
    result = _summary(exact_final, f1_final, all_ids, "")
    result["missing"] = len(missing)
    if version_2:
        result.update(_summary(exact_final, f1_final,
                               [q for q in all_ids if has_answer[q]], "HasAns_"))
        result.update(_summary(exact_final, f1_final,
                               [q for q in all_ids if not has_answer[q]], "NoAns_"))
        if null_odds is not None:
            result["best_exact"], result["best_exact_thresh"] = _best_threshold(
                predictions, exact, null_odds, has_answer)
            result["best_f1"], result["best_f1_thresh"] = _best_threshold(
                predictions, token_f1, null_odds, has_answer)
    return result


def _gold_answers(example, version_2):
    """The gold texts a prediction is compared with."""
    if version_2:
        golds = [text for text, _ in example.answers if normalize_answer(text)]
        return golds or [""]
    if not example.answers:
        raise ValueError(f"example {example.qas_id!r} has no gold answer to score against")
    return [text for text, _ in example.answers]


def _apply_null_threshold(scores, null_odds, has_answer, threshold):
    """Scores after answering "" wherever the null odds exceed the threshold."""
    return {qid: float(not has_answer[qid]) if null_odds[qid] > threshold else score
            for qid, score in scores.items()}


def _summary(exact, token_f1, qids, prefix):
    """Percent EM/F1 over `qids`; a question absent from the scores counts 0."""
    total = len(qids)
    key = "exact" if prefix else "exact_match"
    if not total:
        return {f"{prefix}{key}": 0.0, f"{prefix}f1": 0.0, f"{prefix}total": 0}
    return {
        f"{prefix}{key}": 100.0 * sum(exact.get(q, 0.0) for q in qids) / total,
        f"{prefix}f1": 100.0 * sum(token_f1.get(q, 0.0) for q in qids) / total,
        f"{prefix}total": total,
    }


def _best_threshold(predictions, scores, null_odds, has_answer):
    """(best percent score, its threshold) over all null-odds thresholds.

    evaluate-v2.0.py's sweep: start with every question answered "" (right
    for the impossible ones), then, by increasing null odds, let each
    question keep its predicted text instead: an answerable one gains its
    raw score, an impossible one loses 1 if its prediction is not empty.
    Missing predictions stay wrong and count in the denominator.
    """
    score = best = sum(1 for qid in scores if not has_answer[qid])
    best_threshold = 0.0
    for qid in sorted(scores, key=lambda q: null_odds[q]):
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, best_threshold = score, null_odds[qid]
    return 100.0 * best / len(has_answer), float(best_threshold)
