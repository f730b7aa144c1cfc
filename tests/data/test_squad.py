"""Tests for bert_tf.data.squad: reading SQuAD files and building span features."""

import functools
import json

import numpy as np
import pytest

from bert_tf.data import squad

DEV = ("squad", "dev-v1.1.json")
V2_SAMPLE = ("squad", "squad_v2_sample_hf_format.json")
VOCAB = ("vocab", "bert-base-uncased-vocab.txt")


@functools.cache
def _tokenizer(vocab_file):
    from bert_tf.text.tokenizer import BertTokenizer

    return BertTokenizer(vocab_file, lower_case=True)


@pytest.fixture
def tokenizer(shared_file):
    return _tokenizer(shared_file(*VOCAB))


def _write(tmp_path, content, name="squad.json"):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return str(path)


def _official(qas, context="Paris is the capital of France.", version="1.1"):
    return {"version": version,
            "data": [{"title": "Paris", "paragraphs": [{"context": context, "qas": qas}]}]}


# --- reading -------------------------------------------------------------


def test_reads_official_dev_v11(shared_file):
    path = shared_file(*DEV)
    examples, version = squad.read_squad(path)
    assert version == "1.1"
    assert len(examples) == 10570
    first = examples[0]
    assert first.qas_id == "56be4db0acb8001400a502ec"
    assert first.question == "Which NFL team represented the AFC at Super Bowl 50?"
    assert first.title == "Super_Bowl_50"
    assert first.answers == (("Denver Broncos", 177),) * 3
    assert not first.is_impossible
    assert len({e.qas_id for e in examples}) == 10570
    assert len({e.context for e in examples}) == 2067
    for example in examples:
        assert example.answers
        for text, start in example.answers:
            assert example.context[start:start + len(text)] == text


def test_split_by_article_even_and_odd_partition_the_dev_set(shared_file):
    path = shared_file(*DEV)
    seen = []
    everything = squad.split_by_article(path, lambda i: seen.append(i) or True)
    assert seen == list(range(48))
    even = squad.split_by_article(path, lambda i: i % 2 == 0)
    odd = squad.split_by_article(path, lambda i: i % 2 == 1)
    assert (len(even), len(odd)) == (5397, 5173)
    assert len(even) + len(odd) == len(everything) == 10570
    assert {e.title for e in even}.isdisjoint({e.title for e in odd})
    assert even[0].title == "Super_Bowl_50" and odd[0].title == "Warsaw"


def test_reads_flattened_v2_sample_with_impossible_questions(shared_file):
    examples, version = squad.read_squad(shared_file(*V2_SAMPLE))
    assert version == "2.0"
    assert len(examples) == 14
    impossible = [e.qas_id for e in examples if e.is_impossible]
    assert impossible == ["5ad39d53604f3c001a3fe8d3", "5ad39d53604f3c001a3fe8d4",
                          "5ad3a266604f3c001a3fea2b", "5ad5316b5b96ef001a10ab76",
                          "5ad532575b96ef001a10ab7f", "5ad532575b96ef001a10ab80"]
    assert all(e.answers == () for e in examples if e.is_impossible)
    second = examples[1]
    assert second.answers == (
        ("10th and 11th centuries", 94), ("in the 10th and 11th centuries", 87),
        ("10th and 11th centuries", 94), ("10th and 11th centuries", 94))


def test_reads_official_v2_layout_with_plausible_answers(tmp_path):
    qas = [
        {"id": "q1", "question": "What is the capital of France?", "is_impossible": False,
         "answers": [{"text": "Paris", "answer_start": 0}]},
        {"id": "q2", "question": "What is the capital of Spain?", "is_impossible": True,
         "answers": [], "plausible_answers": [{"text": "France", "answer_start": 24}]},
    ]
    examples, version = squad.read_squad(_write(tmp_path, _official(qas, version="v2.0")))
    assert version == "2.0"
    assert examples[0] == squad.SquadExample(
        "q1", "What is the capital of France?", "Paris is the capital of France.",
        (("Paris", 0),), False, "Paris")
    assert examples[1].is_impossible and examples[1].answers == ()
    assert examples[1].plausible_answers == (("France", 24),)


def test_flattened_records_group_into_articles_by_title(tmp_path):
    def record(qid, title):
        return {"id": qid, "title": title, "question": "Who?", "context": "Ann ran.",
                "answers": {"text": ["Ann"], "answer_start": [0]}}

    path = _write(tmp_path, {"data": [record("a", "T1"), record("b", "T1"), record("c", "T2")]})
    assert [e.qas_id for e in squad.split_by_article(path, lambda i: i == 1)] == ["c"]
    examples, version = squad.read_squad(path)
    assert version == "1.1" and [e.title for e in examples] == ["T1", "T1", "T2"]


@pytest.mark.parametrize("qas, key, expected", [
    ([{"id": "q1", "question": "Which?", "answers": [{"text": "Paris"}]}],
     "data[0].paragraphs[0].qas[0].answers[0].answer_start", "missing key 'answer_start'"),
    ([{"id": "q1", "question": "Which?", "answers": [{"text": "Paris", "answer_start": 0}]},
      {"id": "q2", "question": "Which?", "answers": [{"text": "France", "answer_start": 3}]}],
     "data[0].paragraphs[0].qas[1].answers[0]", "is not at answer_start 3"),
    ([{"id": "q1", "question": "Which?", "answers": [{"text": "Paris", "answer_start": "0"}]}],
     "data[0].paragraphs[0].qas[0].answers[0].answer_start", "expected integer, got string '0'"),
    ([{"id": "q1", "answers": []}], "data[0].paragraphs[0].qas[0].question", "missing key"),
    ([{"id": "q1", "question": "Which?", "answers": {"text": "Paris"}}],
     "data[0].paragraphs[0].qas[0].answers", "expected array, got object"),
    ([{"id": "q1", "question": "Which?", "is_impossible": True,
       "answers": [{"text": "Paris", "answer_start": 0}]}],
     "data[0].paragraphs[0].qas[0].answers", "impossible question must have no answers"),
])
def test_malformed_official_file_names_the_key(tmp_path, qas, key, expected):
    path = _write(tmp_path, _official(qas))
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad(path)
    assert str(error.value).startswith(f"{path}: {key}: ")
    assert expected in str(error.value)


def test_repeated_question_id_is_an_error(tmp_path):
    qa = {"id": "q1", "question": "Which?", "answers": [{"text": "Paris", "answer_start": 0}]}
    qas = [qa, qa]
    with pytest.raises(squad.SquadFormatError, match="question id 'q1' appears more than once"):
        squad.read_squad(_write(tmp_path, _official(qas)))


def test_malformed_flattened_record_names_the_key(tmp_path):
    record = {"id": "q1", "question": "Who?", "context": "Ann ran.",
              "answers": {"text": ["Ann", "ran"], "answer_start": [0]}}
    path = _write(tmp_path, {"data": [record]})
    with pytest.raises(squad.SquadFormatError,
                       match=r"data\[0\]\.answers: 2 texts but 1 answer_start"):
        squad.read_squad(path)


def test_invalid_json_names_file_and_line(tmp_path):
    path = _write(tmp_path, '{"data": [\n  {"title": "x",,}\n]}')
    with pytest.raises(squad.SquadFormatError,
                       match=r"squad\.json: not valid JSON at line 2 column"):
        squad.read_squad(path)


def test_missing_data_key_and_missing_file(tmp_path):
    with pytest.raises(squad.SquadFormatError, match=r"squad\.json: data: missing key 'data'"):
        squad.read_squad(_write(tmp_path, {"version": "1.1"}))
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        squad.read_squad(str(tmp_path / "nothing.json"))


# --- features ------------------------------------------------------------

LETTERS = "a b c d e f g h i j"  # ten one-char tokens, char offsets 0, 2, ..., 18


def _example(context, answer=None, question="q", qas_id="x"):
    answers = () if answer is None else (answer,)
    return squad.SquadExample(qas_id, question, context, answers, is_impossible=answer is None)


def test_windows_stride_labels_and_layout(tokenizer):
    # Question "q" is one token: 8 - 1 - 3 = 4 context tokens per window,
    # starting every 2 tokens -> windows over tokens 0-3, 2-5, 4-7, 6-9.
    example = _example(LETTERS, answer=("d e", 6))
    features = squad.create_features([example], tokenizer, max_seq_length=8, doc_stride=2,
                                     max_query_length=5)
    assert len(features) == 4
    q, a, b, c, d, e, f, g, h, i, j = (tokenizer.token_to_id(t) for t in "qabcdefghij")
    np.testing.assert_array_equal(features.token_ids, [
        [101, q, 102, a, b, c, d, 102], [101, q, 102, c, d, e, f, 102],
        [101, q, 102, e, f, g, h, 102], [101, q, 102, g, h, i, j, 102]])
    np.testing.assert_array_equal(features.segment_ids, [[0, 0, 0, 1, 1, 1, 1, 1]] * 4)
    np.testing.assert_array_equal(features.padding_mask, np.ones((4, 8)))
    np.testing.assert_array_equal(features.example_index, [0, 0, 0, 0])
    # "d e" = tokens 3-4: only the second window holds both (rows 4-5 there).
    np.testing.assert_array_equal(features.start_positions, [0, 4, 0, 0])
    np.testing.assert_array_equal(features.end_positions, [0, 5, 0, 0])
    np.testing.assert_array_equal(features.token_to_char[1, :, 0], [-1, -1, -1, 4, 6, 8, 10, -1])
    np.testing.assert_array_equal(features.token_to_char[1, :, 1], [-1, -1, -1, 5, 7, 9, 11, -1])
    for name in ("token_ids", "segment_ids", "padding_mask", "example_index", "start_positions"):
        assert getattr(features, name).dtype == np.int32, name
    assert features.token_to_char.dtype == np.int32 and features.max_context.dtype == bool


def test_max_context_on_hand_made_windows(tokenizer):
    # Same windows as above: each token belongs to the window where
    # min(left, right) context is largest, e.g. token 2 (c) scores 1 in the
    # first window and 0 in the second.
    features = squad.create_features([_example(LETTERS)], tokenizer, max_seq_length=8,
                                     doc_stride=2)
    T, F = True, False
    np.testing.assert_array_equal(features.max_context, [
        [F, F, F, T, T, T, F, F], [F, F, F, F, T, T, F, F],
        [F, F, F, F, T, T, F, F], [F, F, F, F, T, T, T, F]])


def test_max_context_ties_go_to_the_earlier_window(tokenizer):
    # Six tokens, windows of 4 with stride 1: tokens 0-3, 1-4, 2-5. Token 2
    # scores 1 in the first two windows, token 3 in the last two.
    example = _example("a b c d e f")
    features = squad.create_features([example], tokenizer, max_seq_length=8, doc_stride=1)
    T, F = True, False
    np.testing.assert_array_equal(features.max_context[:, 3:7], [
        [T, T, T, F], [F, F, T, F], [F, F, T, T]])


def test_question_truncation_padding_and_impossible_label(tokenizer):
    example = _example("a b c", question="who is it", qas_id="y")
    features = squad.create_features([example], tokenizer, max_seq_length=10, doc_stride=2,
                                     max_query_length=2)
    who, is_ = tokenizer.token_to_id("who"), tokenizer.token_to_id("is")
    a, b, c = (tokenizer.token_to_id(t) for t in "abc")
    np.testing.assert_array_equal(features.token_ids, [[101, who, is_, 102, a, b, c, 102, 0, 0]])
    np.testing.assert_array_equal(features.segment_ids, [[0, 0, 0, 0, 1, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(features.padding_mask, [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]])
    assert (features.start_positions[0], features.end_positions[0]) == (0, 0)


def test_answer_cutting_a_token_is_widened_to_whole_tokens(tokenizer):
    # "Eiffel" is e + ##iff + ##el (chars 4-5, 5-8, 8-10); "ffe" cuts two pieces.
    context = "The Eiffel tower stands."
    features = squad.create_features([_example(context, answer=("ffe", 6))], tokenizer,
                                     max_seq_length=16)
    start, end = features.start_positions[0], features.end_positions[0]
    assert (start, end) == (5, 6)  # [CLS] q [SEP] the e ##iff ##el
    assert context[features.token_to_char[0, start, 0]:features.token_to_char[0, end, 1]] == "iffel"


def test_char_offsets_in_non_ascii_context(tokenizer):
    context = "Café Müller sang über 1850 songs."
    features = squad.create_features([_example(context, answer=("über 1850", 17))], tokenizer,
                                     max_seq_length=16)
    chars = features.token_to_char[0]
    np.testing.assert_array_equal(chars[3:10], [[0, 4], [5, 11], [12, 16], [17, 21], [22, 26],
                                               [27, 32], [32, 33]])
    start, end = features.start_positions[0], features.end_positions[0]
    assert context[chars[start, 0]:chars[end, 1]] == "über 1850"


def test_no_examples_give_empty_features(tokenizer):
    features = squad.create_features([], tokenizer, max_seq_length=16)
    assert len(features) == 0
    assert features.token_ids.shape == (0, 16) and features.token_to_char.shape == (0, 16, 2)


def test_bad_lengths_are_rejected(tokenizer):
    long_question = _example(LETTERS, question="a b c d e", qas_id="long")
    with pytest.raises(ValueError, match=r"example 0 \(long\): a question of 5 tokens leaves no"):
        squad.create_features([long_question], tokenizer, max_seq_length=8)
    with pytest.raises(ValueError, match="max_query_length"):
        squad.create_features([_example(LETTERS)], tokenizer, max_query_length=0)
    with pytest.raises(ValueError, match="doc_stride"):
        squad.create_features([_example(LETTERS)], tokenizer, max_seq_length=8, doc_stride=0)


def test_real_dev_labels_decode_to_the_gold_answers(shared_file, tokenizer):
    examples, _ = squad.read_squad(shared_file(*DEV))
    examples = examples[:2000]
    features = squad.create_features(examples, tokenizer)
    labelled = {}
    for f in np.nonzero(features.start_positions)[0]:
        labelled.setdefault(features.example_index[f], f)
    assert len(labelled) == 2000  # every answer fits in some window
    exact = 0
    for index, f in labelled.items():
        chars = features.token_to_char[f]
        decoded = examples[index].context[chars[features.start_positions[f], 0]:
                                          chars[features.end_positions[f], 1]]
        gold = examples[index].answers[0][0]
        # Widening to whole tokens only ever adds characters around the gold text.
        assert gold in decoded, (examples[index].qas_id, decoded, gold)
        exact += decoded == gold
    # Measured: 1,983 of 2,000; the other 17 gold answers cut a word
    # ("wards" of "backwards", "ten" of "contenders").
    assert exact >= 1983


def test_full_dev_set_features(shared_file, tokenizer):
    examples, _ = squad.read_squad(shared_file(*DEV))
    features = squad.create_features(examples, tokenizer)
    assert len(features) == 10833
    assert features.token_ids.shape == (10833, 384)
    np.testing.assert_array_equal(np.unique(features.example_index), np.arange(10570))
    # Each context token is at its maximum context in exactly one window.
    per_example = np.bincount(features.example_index, weights=features.max_context.sum(1))
    num_tokens = tokenizer.tokenize([e.context for e in examples]).row_lengths().numpy()
    np.testing.assert_array_equal(per_example, num_tokens)


def test_v2_sample_features_label_impossible_questions_with_cls(shared_file, tokenizer):
    examples, _ = squad.read_squad(shared_file(*V2_SAMPLE))
    features = squad.create_features(examples, tokenizer)
    for index, example in enumerate(examples):
        windows = features.example_index == index
        labelled = features.start_positions[windows] > 0
        assert labelled.any() != example.is_impossible, example.qas_id
