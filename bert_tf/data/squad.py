"""SQuAD v1.1 / v2.0 reading and BERT's windowed span features.

Two file layouts are read:
* the official one: {"version", "data": [{"title", "paragraphs": [{"context",
  "qas": [{"id", "question", "answers": [{"text", "answer_start"}],
  "is_impossible", "plausible_answers"}]}]}]} (v2.0 adds the last two keys);
* a flattened one (as the Hugging Face `squad` / `squad_v2` datasets export
  it): {"version", "data": [{"id", "question", "context", "title"?,
  "answers": {"text": [...], "answer_start": [...]}}]}, where an empty
  answer list means an impossible (v2.0) question.

Features follow google-research/bert's `run_squad.py`: [CLS] question [SEP]
context window [SEP], the context cut into windows with a stride, each
context token mapped back to its character span in the original context so
that answers are taken from the context text itself. Shape legend: F
windows (features), L max_seq_length.
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

# Strings per eager tokenizer call: large batches amortise the op overhead.
_TOKENIZE_BATCH = 4000


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question over one context.

    `answers` holds (text, start_char) gold answers, () for an impossible
    (v2.0) or unlabelled question; `plausible_answers` holds v2.0's
    plausible (but wrong) answers of an impossible question, same shape.
    """

    qas_id: str
    question: str
    context: str
    answers: tuple
    is_impossible: bool = False
    title: str = ""
    plausible_answers: tuple = ()


class SquadFormatError(ValueError):
    """A SQuAD file does not have the expected layout; names file and key."""


def read_squad(path):
    """Reads a SQuAD file (official or flattened layout).

    Returns:
      (examples, version): a list of `SquadExample` in file order and "2.0"
      when the file says so or holds an impossible question, else "1.1".

    Raises:
      SquadFormatError: malformed input, naming the file and the key (for
        example `data[3].paragraphs[0].qas[2].answers`).
    """
    articles, version = _read_articles(path)
    return [example for article in articles for example in article], version


def split_by_article(path, keep):
    """Examples of the articles whose index `i` in `data[]` has `keep(i)` true.

    In the flattened layout an article is a run of consecutive records with
    the same "title" (records without one count as titled "").
    """
    articles, _ = _read_articles(path)
    return [example for i, article in enumerate(articles) if keep(i) for example in article]


# --- reading -------------------------------------------------------------


def _read_articles(path):
    """([[SquadExample] per article], version) of a SQuAD file."""
    path = str(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as f:
        raw = f.read()
    try:
        root = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise SquadFormatError(f"{path}: not UTF-8 ({e})") from None
    except json.JSONDecodeError as e:
        raise SquadFormatError(
            f"{path}: not valid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    check = _Checker(path)
    check.type(root, dict, "the top level")
    data = check.key(root, "data", list, "")
    if data and isinstance(data[0], dict) and "paragraphs" in data[0]:
        articles = [_official_article(check, a, f"data[{i}]") for i, a in enumerate(data)]
    else:
        articles = _flat_articles(check, data)
    _check_unique_ids(check, articles)
    declared = str(root.get("version", "")).lstrip("v")
    impossible = any(e.is_impossible for article in articles for e in article)
    version = "2.0" if declared.startswith("2") or impossible else "1.1"
    return articles, version


# JSON names of the Python types `json` decodes to, for error messages.
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
               bool: "boolean", type(None): "null"}


def _check_unique_ids(check, articles):
    """Predictions are keyed by question id: a repeated id would be ambiguous."""
    seen = set()
    for example in (e for article in articles for e in article):
        if example.qas_id in seen:
            check.fail("data", f"question id {example.qas_id!r} appears more than once")
        seen.add(example.qas_id)


class _Checker:
    """Type checks whose errors name the file and the JSON key path."""

    def __init__(self, path):
        self.path = path

    def fail(self, where, message):
        raise SquadFormatError(f"{self.path}: {where}: {message}")

    def type(self, value, expected, where):
        """`value` if it is of the `expected` type (or tuple of types)."""
        expected = expected if isinstance(expected, tuple) else (expected,)
        # bool is an int in Python; JSON true is never a valid offset or id.
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            wanted = " or ".join(_JSON_TYPES[t] for t in expected)
            got = _JSON_TYPES.get(type(value), type(value).__name__)
            self.fail(where, f"expected {wanted}, got {got} {value!r:.60}")
        return value

    def key(self, mapping, key, expected, where, default=None):
        """mapping[key] checked against `expected`; missing -> error unless a default."""
        full = f"{where}.{key}" if where else key
        if key not in mapping:
            if default is not None:
                return default
            self.fail(full, f"missing key {key!r}")
        return self.type(mapping[key], expected, full)


def _official_article(check, article, where):
    check.type(article, dict, where)
    title = check.key(article, "title", str, where, default="")
    examples = []
    paragraphs = check.key(article, "paragraphs", list, where)
    for p, paragraph in enumerate(paragraphs):
        p_where = f"{where}.paragraphs[{p}]"
        check.type(paragraph, dict, p_where)
        context = _context(check, paragraph, p_where)
        for q, qa in enumerate(check.key(paragraph, "qas", list, p_where)):
            q_where = f"{p_where}.qas[{q}]"
            check.type(qa, dict, q_where)
            impossible = check.key(qa, "is_impossible", bool, q_where, default=False)
            answers = _official_answers(check, qa, "answers", context, q_where)
            plausible = _official_answers(check, qa, "plausible_answers", context, q_where)
            if impossible and answers:
                check.fail(f"{q_where}.answers", "an impossible question must have no answers")
            examples.append(SquadExample(
                qas_id=_qas_id(check, qa, q_where),
                question=check.key(qa, "question", str, q_where),
                context=context,
                answers=answers,
                is_impossible=impossible,
                title=title,
                plausible_answers=plausible,
            ))
    return examples


def _official_answers(check, qa, key, context, where):
    answers = check.key(qa, key, list, where, default=[])
    result = []
    for a, answer in enumerate(answers):
        a_where = f"{where}.{key}[{a}]"
        check.type(answer, dict, a_where)
        text = check.key(answer, "text", str, a_where)
        start = check.key(answer, "answer_start", int, a_where)
        result.append(_answer(check, text, start, context, a_where))
    return tuple(result)


def _flat_articles(check, records):
    """Groups flattened records into articles: runs of one title."""
    articles, titles = [], []
    for i, record in enumerate(records):
        where = f"data[{i}]"
        check.type(record, dict, where)
        if "paragraphs" in record:
            check.fail(where, "mixes the official layout (paragraphs) with flattened records")
        title = check.key(record, "title", str, where, default="")
        context = _context(check, record, where)
        answers = check.key(record, "answers", dict, where)
        texts = check.key(answers, "text", list, f"{where}.answers")
        starts = check.key(answers, "answer_start", list, f"{where}.answers")
        if len(texts) != len(starts):
            check.fail(f"{where}.answers",
                       f"{len(texts)} texts but {len(starts)} answer_start values")
        parsed = []
        for a, (text, start) in enumerate(zip(texts, starts)):
            check.type(text, str, f"{where}.answers.text[{a}]")
            check.type(start, int, f"{where}.answers.answer_start[{a}]")
            parsed.append(_answer(check, text, start, context, f"{where}.answers[{a}]"))
        example = SquadExample(
            qas_id=_qas_id(check, record, where),
            question=check.key(record, "question", str, where),
            context=context,
            answers=tuple(parsed),
            # The flattened layout marks an impossible question by no answers.
            is_impossible=not parsed,
            title=title,
        )
        if articles and title == titles[-1]:
            articles[-1].append(example)
        else:
            articles.append([example])
            titles.append(title)
    return articles


def _qas_id(check, qa, where):
    qas_id = check.key(qa, "id", (str, int), where)
    return str(qas_id)


def _context(check, mapping, where):
    context = check.key(mapping, "context", str, where)
    if not context.strip():
        check.fail(f"{where}.context", "expected a non-empty context")
    return context


def _answer(check, text, start, context, where):
    """(text, start) after checking the text is at `start` in the context."""
    if not text.strip():
        check.fail(f"{where}.text", "expected a non-blank answer text")
    found = context[start:start + len(text)] if start >= 0 else None
    if found != text:
        check.fail(where, f"answer text {text!r:.60} is not at answer_start {start} of the "
                          f"context (found {found!r:.60})")
    return (text, start)


# --- features ------------------------------------------------------------


@dataclasses.dataclass
class SquadFeatures:
    """BERT inputs for SQuAD: one row per context window.

    token_ids: int32 [F, L] [CLS] question [SEP] window [SEP] then padding.
    segment_ids: int32 [F, L] 1 on the window and its [SEP], else 0.
    padding_mask: int32 [F, L] 1 on real tokens.
    example_index: int32 [F] index of the window's example.
    token_to_char: int32 [F, L, 2] (start, end) char offsets of each context
      token in the example's context, end exclusive; -1 elsewhere.
    max_context: bool [F, L] the context token has its maximum context in
      this window (BERT's `_check_is_max_context`).
    start_positions / end_positions: int32 [F] token span of the first gold
      answer in this window; 0 ([CLS]) when impossible or not in the window.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    example_index: np.ndarray
    token_to_char: np.ndarray
    max_context: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray

    def __len__(self):
        """Number of windows F."""
        return len(self.example_index)


def create_features(examples, tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64):
    """Windows, inputs and span labels of `examples` (BERT's recipe).

    The question is cut to `max_query_length` tokens; the context is cut
    into windows of `max_seq_length - len(question) - 3` tokens, each
    starting `doc_stride` tokens after the previous one (the last window
    ends at the last token). Labels come from the first gold answer: the
    context tokens overlapping its char span, so a span that cuts a token
    is widened to whole tokens.

    Args:
      examples: sequence of `SquadExample`.
      tokenizer: a `bert_tf.text.tokenizer.BertTokenizer`.

    Returns:
      `SquadFeatures`; every example has at least one window.
    """
    if max_query_length < 1 or max_seq_length < 4:
        raise ValueError(f"max_query_length ({max_query_length}) must be >= 1 and max_seq_length "
                         f"({max_seq_length}) >= 4")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be >= 1, got {doc_stride}")
    contexts = sorted({e.context for e in examples})
    context_tokens = dict(zip(contexts, _tokenize_contexts(tokenizer, contexts)))
    questions = _tokenize_questions(tokenizer, [e.question for e in examples])
    rows = []
    for index, example in enumerate(examples):
        ids, chars = context_tokens[example.context]
        question = questions[index][:max_query_length]
        span = _answer_token_span(example, chars)
        window_length = max_seq_length - len(question) - 3
        if window_length < 1:
            raise ValueError(
                f"example {index} ({example.qas_id}): a question of {len(question)} tokens leaves "
                f"no room for context in max_seq_length {max_seq_length}; lower max_query_length")
        windows = _windows(len(ids), window_length, doc_stride)
        for window, max_context in zip(windows, _max_context(len(ids), windows)):
            rows.append(_window_row(tokenizer, index, question, ids, chars, window,
                                    max_context, span))
    return _stack(rows, max_seq_length)


def _tokenize_contexts(tokenizer, contexts):
    """(ids int32 [T], chars int32 [T, 2]) per context, char offsets end exclusive."""
    result = []
    for i in range(0, len(contexts), _TOKENIZE_BATCH):
        batch = contexts[i:i + _TOKENIZE_BATCH]
        ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(batch, tf.string))
        splits = ids.row_splits.numpy()
        flat_ids = ids.flat_values.numpy().astype(np.int32)
        flat_starts = starts.flat_values.numpy()
        flat_ends = ends.flat_values.numpy()
        for j, context in enumerate(batch):
            row = slice(splits[j], splits[j + 1])
            byte_to_char = _byte_to_char(context)
            chars = np.stack([byte_to_char[flat_starts[row]], byte_to_char[flat_ends[row]]], -1)
            result.append((flat_ids[row], chars.astype(np.int32)))
    return result


def _byte_to_char(text):
    """int array [bytes + 1]: char index of each UTF-8 byte, then len(text).

    The tokenizer's offsets are byte offsets at char boundaries, so this
    maps both starts and (exclusive) ends to char offsets.
    """
    encoded = np.frombuffer(text.encode("utf-8"), np.uint8)
    # Continuation bytes are 0b10xxxxxx; every other byte starts a char.
    starts_char = (encoded & 0xC0) != 0x80
    return np.append(np.cumsum(starts_char) - 1, len(text))


def _tokenize_questions(tokenizer, questions):
    result = []
    for i in range(0, len(questions), _TOKENIZE_BATCH):
        ids = tokenizer.tokenize(tf.constant(questions[i:i + _TOKENIZE_BATCH], tf.string))
        splits = ids.row_splits.numpy()
        flat = ids.flat_values.numpy().astype(np.int32)
        result.extend(flat[splits[j]:splits[j + 1]] for j in range(len(splits) - 1))
    return result


def _answer_token_span(example, chars):
    """(first, last) context token of the first gold answer, or None."""
    if example.is_impossible or not example.answers:
        return None
    text, start = example.answers[0]
    end = start + len(text)
    inside = np.nonzero((chars[:, 1] > start) & (chars[:, 0] < end))[0]
    if not len(inside):
        raise ValueError(f"example {example.qas_id}: answer {text!r} at char {start} covers no "
                         f"token of its context (only characters the tokenizer drops)")
    return inside[0], inside[-1]


def _windows(num_tokens, window_length, stride):
    """(start, length) of each context window, as BERT's `doc_spans`."""
    windows, start = [], 0
    while True:
        length = min(num_tokens - start, window_length)
        windows.append((start, length))
        if start + length >= num_tokens:
            return windows
        start += min(length, stride)


def _max_context(num_tokens, windows):
    """bool [length] per window: its tokens that have their maximum context there.

    BERT's `_check_is_max_context`: a token's score in a window is
    min(left, right context) + 0.01 * window length; the first window with
    the highest score wins.
    """
    positions = np.arange(num_tokens)
    best_score = np.full(num_tokens, -np.inf)
    best_window = np.full(num_tokens, -1)
    for w, (start, length) in enumerate(windows):
        pos = positions[start:start + length]
        score = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
        better = score > best_score[pos]  # strict: ties keep the earlier window
        best_score[pos[better]] = score[better]
        best_window[pos[better]] = w
    return [best_window[start:start + length] == w for w, (start, length) in enumerate(windows)]


def _window_row(tokenizer, index, question, ids, chars, window, max_context, span):
    """The arrays of one window, unpadded, as a dict of `SquadFeatures` fields."""
    start, length = window
    offset = len(question) + 2  # [CLS] question [SEP]
    token_ids = np.concatenate([
        [tokenizer.cls_id], question, [tokenizer.sep_id],
        ids[start:start + length], [tokenizer.sep_id]]).astype(np.int32)
    segment_ids = np.zeros(len(token_ids), np.int32)
    segment_ids[offset:] = 1
    token_to_char = np.full((len(token_ids), 2), -1, np.int32)
    token_to_char[offset:offset + length] = chars[start:start + length]
    is_max_context = np.zeros(len(token_ids), bool)
    is_max_context[offset:offset + length] = max_context
    label = (0, 0)
    if span is not None and start <= span[0] and span[1] < start + length:
        label = (span[0] - start + offset, span[1] - start + offset)
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "example_index": index,
        "token_to_char": token_to_char,
        "max_context": is_max_context,
        "start_positions": label[0],
        "end_positions": label[1],
    }


def _stack(rows, max_seq_length):
    """`SquadFeatures` from window rows, padded to `max_seq_length`."""
    num = len(rows)
    token_ids = np.zeros((num, max_seq_length), np.int32)
    segment_ids = np.zeros((num, max_seq_length), np.int32)
    padding_mask = np.zeros((num, max_seq_length), np.int32)
    token_to_char = np.full((num, max_seq_length, 2), -1, np.int32)
    max_context = np.zeros((num, max_seq_length), bool)
    for f, row in enumerate(rows):
        used = len(row["token_ids"])
        token_ids[f, :used] = row["token_ids"]
        segment_ids[f, :used] = row["segment_ids"]
        padding_mask[f, :used] = 1
        token_to_char[f, :used] = row["token_to_char"]
        max_context[f, :used] = row["max_context"]
    return SquadFeatures(
        token_ids=token_ids,
        segment_ids=segment_ids,
        padding_mask=padding_mask,
        example_index=np.array([r["example_index"] for r in rows], np.int32).reshape(num),
        token_to_char=token_to_char,
        max_context=max_context,
        start_positions=np.array([r["start_positions"] for r in rows], np.int32).reshape(num),
        end_positions=np.array([r["end_positions"] for r in rows], np.int32).reshape(num),
    )
