"""SQuAD answers from span logits: BERT's n-best post-processing.

For each example, every window proposes its `n_best_size` best start and
end tokens among its real (unpadded) ones; valid pairs (both in the
context, end >= start, at most `max_answer_length` tokens, start token at
its maximum context in that window) are ranked by start + end logit. The
answer text is the original context substring between the pair's char
offsets, so casing, accents and spacing are those of the context. For
SQuAD v2.0 the null answer scores the lowest [CLS] start + end logit over
the windows and wins when it beats the best span by more than
`null_score_diff_threshold`.
"""

import json
import os

import numpy as np

from bert_tf import storage

# Offsets reported for the null ("") answer, which has no place in the context.
NULL_CHAR = -1


def predict_answers(examples, features, start_logits, end_logits, n_best_size=20,
                    max_answer_length=30, version_2_with_negative=False,
                    null_score_diff_threshold=0.0):
    """Best answer, n-best list and null odds of each example.

    Args:
      examples: the `SquadExample` list the features were made from.
      features: `bert_tf.data.squad_windows.SquadFeatures`.
      start_logits, end_logits: float arrays [F, L] aligned with `features`.

    Returns:
      (predictions, nbest, null_odds):
      predictions {qas_id: answer text}, "" for the null answer (v2.0) or
        when no valid span exists;
      nbest {qas_id: [{"text", "probability", "start_logit", "end_logit",
        "start_char", "end_char"}, ...]} best first, distinct texts,
        probabilities a softmax over the listed entries; the null entry has
        text "" and chars -1;
      null_odds {qas_id: null score - best span score} for v2.0 (+inf when
        no valid span exists), else {}.
    """
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    expected = features.token_ids.shape
    for name, logits in (("start_logits", start_logits), ("end_logits", end_logits)):
        if logits.shape != expected:
            raise ValueError(f"{name} has shape {logits.shape}; expected {expected} "
                             f"(one row per feature)")
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(f"n_best_size ({n_best_size}) and max_answer_length "
                         f"({max_answer_length}) must be >= 1")
    windows = [[] for _ in examples]
    for f, index in enumerate(features.example_index):
        windows[index].append(f)
    predictions, nbest, null_odds = {}, {}, {}
    for index, example in enumerate(examples):
        if not windows[index]:
            raise ValueError(f"example {index} ({example.qas_id}) has no feature")
        spans = []
        for f in windows[index]:
            spans.extend(_window_spans(features, f, start_logits[f], end_logits[f],
                                       n_best_size, max_answer_length))
        null_window = min(windows[index], key=lambda f: start_logits[f, 0] + end_logits[f, 0])
        null = (start_logits[null_window, 0], end_logits[null_window, 0], NULL_CHAR, NULL_CHAR)
        entries = _nbest(example.context, spans, null if version_2_with_negative else None,
                         n_best_size)
        nbest[example.qas_id] = entries
        best_span = next((e for e in entries if e["text"]), None)
        if not version_2_with_negative:
            predictions[example.qas_id] = best_span["text"] if best_span else ""
            continue
        if best_span is None:
            null_odds[example.qas_id] = float("inf")
            predictions[example.qas_id] = ""
            continue
        odds = null[0] + null[1] - best_span["start_logit"] - best_span["end_logit"]
        null_odds[example.qas_id] = float(odds)
        predictions[example.qas_id] = "" if odds > null_score_diff_threshold else best_span["text"]
    return predictions, nbest, null_odds


def _top(logits, n):
    """Indexes of the n largest logits, largest first; ties keep index order."""
    return np.argsort(-logits, kind="stable")[:n]


def _window_spans(features, f, start_logits, end_logits, n_best_size, max_answer_length):
    """Valid (start_logit, end_logit, start_char, end_char) spans of window f.

    Listed in BERT's order (start candidates, then end candidates, both
    best first) so that the stable sort by score breaks ties as BERT does.
    Only the window's real tokens are candidates: positions past its length
    (padding, whatever their logits) never take one of the n-best slots.
    """
    chars = features.token_to_char[f]  # [L, 2]
    real = features.padding_mask[f].astype(bool)  # [L]
    starts = _top(np.where(real, start_logits, -np.inf), n_best_size)
    ends = _top(np.where(real, end_logits, -np.inf), n_best_size)
    s, e = np.meshgrid(starts, ends, indexing="ij")  # [n, n]
    s, e = s.ravel(), e.ravel()
    valid = ((chars[s, 0] >= 0) & (chars[e, 0] >= 0) & features.max_context[f, s]
             & (e >= s) & (e - s + 1 <= max_answer_length))
    s, e = s[valid], e[valid]
    return list(zip(start_logits[s], end_logits[e], chars[s, 0], chars[e, 1]))


def _nbest(context, spans, null, n_best_size):
    """The n-best entries of one example: distinct texts, best score first.

    `null` (v2.0) is the null candidate; it is always listed, even when it
    ranks below the n best spans. Without any candidate the list holds one
    null entry scored 0, so every example has a prediction.
    """
    candidates = spans + ([null] if null is not None else [])
    candidates.sort(key=lambda c: c[0] + c[1], reverse=True)  # stable, like BERT
    chosen, seen = [], set()
    for start_logit, end_logit, start_char, end_char in candidates:
        if len(chosen) >= n_best_size:
            break
        text = context[start_char:end_char] if start_char != NULL_CHAR else ""
        if text in seen:
            continue
        seen.add(text)
        chosen.append((text, start_logit, end_logit, start_char, end_char))
    if null is not None and "" not in seen:
        chosen.append(("",) + null)
    if not chosen:
        chosen.append(("", 0.0, 0.0, NULL_CHAR, NULL_CHAR))
    scores = np.array([c[1] + c[2] for c in chosen])
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    return [
        {"text": text, "probability": float(p), "start_logit": float(start_logit),
         "end_logit": float(end_logit), "start_char": int(start_char), "end_char": int(end_char)}
        for (text, start_logit, end_logit, start_char, end_char), p in zip(chosen, probabilities)
    ]


def write_predictions(output_dir, predictions, nbest, null_odds):
    """Writes the official scorers' input files into `output_dir`.

    predictions.json ({qas_id: text}: evaluate-v1.1.py / evaluate-v2.0.py's
    prediction file), nbest_predictions.json and, when `null_odds` is not
    empty, null_odds.json (evaluate-v2.0.py's --na-prob-file).

    Returns:
      {"predictions": path, "nbest_predictions": path[, "null_odds": path]}.
    """
    storage.makedirs(output_dir, exist_ok=True)
    files = {"predictions": predictions, "nbest_predictions": nbest}
    if null_odds:
        files["null_odds"] = null_odds
    paths = {}
    for name, content in files.items():
        path = os.path.join(output_dir, f"{name}.json")
        # Written whole: a rewritten file replaces the old one on every file system.
        with storage.atomic_write(path, encoding="utf-8") as f:
            # The official scorers read this with json.load, which accepts
            # the Infinity written for an example without any valid span.
            f.write(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
        paths[name] = path
    return paths
