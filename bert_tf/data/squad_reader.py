"""SQuAD v1.1 / v2.0 files read into examples, with errors naming the file and key.

Two file layouts are read:
* the official one: {"version", "data": [{"title", "paragraphs": [{"context",
  "qas": [{"id", "question", "answers": [{"text", "answer_start"}],
  "is_impossible", "plausible_answers"}]}]}]} (v2.0 adds the last two keys);
* a flattened one (as the Hugging Face `squad` / `squad_v2` datasets export
  it): {"version", "data": [{"id", "question", "context", "title"?,
  "answers": {"text": [...], "answer_start": [...]}}]}, where an empty
  answer list means an impossible (v2.0) question.

`bert_tf.data.squad_windows` cuts the examples into the windows the model reads.
"""

import dataclasses
import json
from collections.abc import Callable

import tensorflow as tf


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


def read_squad(path: str) -> tuple[list[SquadExample], str]:
    """Reads a SQuAD file (official or flattened layout).

    Args:
      path: the JSON file (any file system TensorFlow reads).

    Returns:
      (examples, version): a list of `SquadExample` in file order and "2.0"
      when the file says so or holds an impossible question, else "1.1".

    Raises:
      SquadFormatError: malformed input, naming the file and the key (for
        example `data[3].paragraphs[0].qas[2].answers`).
    """
    articles, version = _read_articles(path)
    return [example for article in articles for example in article], version


def split_by_article(path: str, keep: Callable[[int], bool]) -> list[SquadExample]:
    """Examples of the articles whose index `i` in `data[]` has `keep(i)` true.

    In the flattened layout an article is a run of consecutive records with
    the same "title" (records without one count as titled "").

    Args:
      path: the JSON file.
      keep: takes an article's index, says whether its examples are kept.
    """
    articles, _ = _read_articles(path)
    return [example for i, article in enumerate(articles) if keep(i) for example in article]


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
