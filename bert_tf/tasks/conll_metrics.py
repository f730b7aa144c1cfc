"""Chunk-level NER scores with the semantics of the CoNLL shared task's conlleval.pl.

A label is `O` or `PREFIX-TYPE` with prefix `B` or `I`. Chunks are found the
way conlleval's `startOfChunk`/`endOfChunk` find them, which reads IOB1 and
IOB2 alike:

- a chunk starts at `B-X`, or at `I-X` after `O` or after a tag of another type;
- a chunk ends before `O`, before any `B-`, before a tag of another type, and
  at the end of the sentence.

So in IOB1 `I-PER I-PER I-LOC` is two chunks and `I-PER B-PER` is two chunks.
A predicted chunk counts as correct only when a gold chunk has the same type,
start and end. Precision, recall and F1 are 0 when their denominator is 0, as
in conlleval.
"""

import collections

_OUTSIDE = "O"
_PREFIXES = ("B", "I")


def _split(label, position):
    """(prefix, type) of a label: ("O", "") for outside, else ("B"|"I", type)."""
    if label == _OUTSIDE:
        return _OUTSIDE, ""
    prefix = kind = ""
    if isinstance(label, str):
        prefix, _, kind = label.partition("-")
    if prefix not in _PREFIXES or not kind:
        raise ValueError(f"label {position} is {label!r}; expected 'O', 'B-TYPE' or 'I-TYPE'")
    return prefix, kind


def _chunk_ends(previous_prefix, previous_type, prefix, kind):
    """conlleval's endOfChunk for B/I/O: does the chunk open at the previous tag end here?"""
    if previous_prefix == _OUTSIDE:
        return False
    return prefix in (_OUTSIDE, "B") or kind != previous_type


def _chunk_starts(previous_prefix, previous_type, prefix, kind):
    """conlleval's startOfChunk for B/I/O: does a chunk start at this tag?"""
    if prefix == _OUTSIDE:
        return False
    return prefix == "B" or previous_prefix == _OUTSIDE or kind != previous_type


def chunks(labels):
    """The chunks of one sentence as `(type, start, end_exclusive)`, in order.

    Raises:
      ValueError: for a label that is not `O`, `B-TYPE` or `I-TYPE`, naming its position.
    """
    found = []
    start = None
    previous_prefix, previous_type = _OUTSIDE, ""
    # A trailing "O" closes a chunk still open at the end of the sentence.
    for position, label in enumerate(list(labels) + [_OUTSIDE]):
        prefix, kind = _split(label, position)
        if start is not None and _chunk_ends(previous_prefix, previous_type, prefix, kind):
            found.append((previous_type, start, position))
            start = None
        if _chunk_starts(previous_prefix, previous_type, prefix, kind):
            start = position
        previous_prefix, previous_type = prefix, kind
    return found


def to_iob2(labels):
    """Rewrites one sentence's labels so that every chunk starts with `B-`.

    IOB1 (the original CoNLL-2003 files) marks a chunk's first token with `I-`
    and uses `B-` only where two chunks of the same type touch; IOB2 marks
    every first token with `B-`. Training on IOB2 gives the model one
    unambiguous tag for "a chunk starts here". The chunks themselves, as
    `chunks` reads them, do not change. IOB2 input is returned unchanged.

    Raises:
      ValueError: for a label that is not `O`, `B-TYPE` or `I-TYPE`, naming its position.
    """
    converted = list(labels)
    for kind, start, _ in chunks(converted):
        converted[start] = f"B-{kind}"
    return converted


def to_iob1(labels):
    """Rewrites one sentence's labels in IOB1, the scheme of the original CoNLL-2003 files.

    Every chunk starts with `I-`, except one that directly follows a chunk
    of the same type, which starts with `B-`. The chunks do not change;
    conlleval's token accuracy compares tags literally, so predictions are
    written in the gold file's scheme.
    """
    converted = list(labels)
    previous_end, previous_kind = None, None
    for kind, start, end in chunks(converted):
        touches = previous_end == start and previous_kind == kind
        converted[start] = f"{'B' if touches else 'I'}-{kind}"
        for position in range(start + 1, end):
            converted[position] = f"I-{kind}"
        previous_end, previous_kind = end, kind
    return converted


def _ratio(numerator, denominator):
    """numerator / denominator, or 0.0 when the denominator is 0 (as conlleval)."""
    return numerator / denominator if denominator else 0.0


def _f1(precision, recall):
    """Harmonic mean of precision and recall, 0.0 when both are 0."""
    return _ratio(2 * precision * recall, precision + recall)


def evaluate(gold_sequences, predicted_sequences):
    """Scores predicted label sequences against gold ones, like conlleval.pl.

    Args:
      gold_sequences: one sequence of labels per sentence.
      predicted_sequences: as many sequences, each as long as its gold one.

    Returns:
      A dict with `precision`, `recall` and `f1` over chunks and token
      `accuracy` (fractions in [0, 1]); `per_type`, mapping each chunk type
      seen in gold or predictions to its `precision`, `recall`, `f1` and
      `support` (number of gold chunks); and the counts `found_gold`,
      `found_predicted` and `correct` (chunks).

    Raises:
      ValueError: when the numbers of sentences or of labels differ (naming
        the sentence), a label is malformed, or there is no token at all.
    """
    gold_sequences = list(gold_sequences)
    predicted_sequences = list(predicted_sequences)
    if len(gold_sequences) != len(predicted_sequences):
        raise ValueError(f"{len(gold_sequences)} gold sequences but "
                         f"{len(predicted_sequences)} predicted sequences")
    gold_counts = collections.Counter()
    predicted_counts = collections.Counter()
    correct_counts = collections.Counter()
    tokens = correct_tokens = 0
    for index, (gold, predicted) in enumerate(zip(gold_sequences, predicted_sequences)):
        gold, predicted = list(gold), list(predicted)
        if len(gold) != len(predicted):
            raise ValueError(f"sentence {index}: {len(gold)} gold labels but "
                             f"{len(predicted)} predicted labels")
        try:
            gold_chunks = chunks(gold)
            predicted_chunks = chunks(predicted)
        except ValueError as error:
            raise ValueError(f"sentence {index}: {error}") from None
        gold_counts.update(kind for kind, _, _ in gold_chunks)
        predicted_counts.update(kind for kind, _, _ in predicted_chunks)
        correct_counts.update(kind for kind, _, _ in set(gold_chunks) & set(predicted_chunks))
        tokens += len(gold)
        correct_tokens += sum(g == p for g, p in zip(gold, predicted))
    if not tokens:
        raise ValueError("nothing to evaluate: the sequences hold no labels")
    return _scores(gold_counts, predicted_counts, correct_counts, correct_tokens / tokens)


def _scores(gold_counts, predicted_counts, correct_counts, accuracy):
    """The result dict of `evaluate` from per-type chunk counts."""
    per_type = {}
    for kind in sorted(set(gold_counts) | set(predicted_counts)):
        precision = _ratio(correct_counts[kind], predicted_counts[kind])
        recall = _ratio(correct_counts[kind], gold_counts[kind])
        per_type[kind] = {"precision": precision, "recall": recall,
                          "f1": _f1(precision, recall), "support": gold_counts[kind]}
    found_gold = sum(gold_counts.values())
    found_predicted = sum(predicted_counts.values())
    correct = sum(correct_counts.values())
    precision = _ratio(correct, found_predicted)
    recall = _ratio(correct, found_gold)
    return {
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "accuracy": accuracy,
        "per_type": per_type,
        "found_gold": found_gold,
        "found_predicted": found_predicted,
        "correct": correct,
    }
