"""Tests for bert_tf.data.squad_windows: BERT's windowed span features of SQuAD examples."""

import functools

import numpy as np
import pytest

from bert_tf.data import squad_reader, squad_windows

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


LETTERS = "a b c d e f g h i j"  # ten one-char tokens, char offsets 0, 2, ..., 18


def _example(context, answer=None, question="q", qas_id="x"):
    answers = () if answer is None else (answer,)
    return squad_reader.SquadExample(qas_id, question, context, answers,
                                     is_impossible=answer is None)


def test_windows_stride_labels_and_layout(tokenizer):
    # Question "q" is one token: 8 - 1 - 3 = 4 context tokens per window,
    # starting every 2 tokens -> windows over tokens 0-3, 2-5, 4-7, 6-9.
    example = _example(LETTERS, answer=("d e", 6))
    features = squad_windows.create_features([example], tokenizer, max_seq_length=8, doc_stride=2,
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
    features = squad_windows.create_features([_example(LETTERS)], tokenizer, max_seq_length=8,
                                             doc_stride=2)
    T, F = True, False
    np.testing.assert_array_equal(features.max_context, [
        [F, F, F, T, T, T, F, F], [F, F, F, F, T, T, F, F],
        [F, F, F, F, T, T, F, F], [F, F, F, F, T, T, T, F]])


def test_max_context_ties_go_to_the_earlier_window(tokenizer):
    # Six tokens, windows of 4 with stride 1: tokens 0-3, 1-4, 2-5. Token 2
    # scores 1 in the first two windows, token 3 in the last two.
    example = _example("a b c d e f")
    features = squad_windows.create_features([example], tokenizer, max_seq_length=8, doc_stride=1)
    T, F = True, False
    np.testing.assert_array_equal(features.max_context[:, 3:7], [
        [T, T, T, F], [F, F, T, F], [F, F, T, T]])


def test_question_truncation_padding_and_impossible_label(tokenizer):
    example = _example("a b c", question="who is it", qas_id="y")
    features = squad_windows.create_features([example], tokenizer, max_seq_length=10, doc_stride=2,
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
    features = squad_windows.create_features([_example(context, answer=("ffe", 6))], tokenizer,
                                             max_seq_length=16)
    start, end = features.start_positions[0], features.end_positions[0]
    assert (start, end) == (5, 6)  # [CLS] q [SEP] the e ##iff ##el
    assert context[features.token_to_char[0, start, 0]:features.token_to_char[0, end, 1]] == "iffel"


def test_char_offsets_in_non_ascii_context(tokenizer):
    context = "Café Müller sang über 1850 songs."
    features = squad_windows.create_features([_example(context, answer=("über 1850", 17))],
                                             tokenizer, max_seq_length=16)
    chars = features.token_to_char[0]
    np.testing.assert_array_equal(chars[3:10], [[0, 4], [5, 11], [12, 16], [17, 21], [22, 26],
                                               [27, 32], [32, 33]])
    start, end = features.start_positions[0], features.end_positions[0]
    assert context[chars[start, 0]:chars[end, 1]] == "über 1850"


def test_no_examples_give_empty_features(tokenizer):
    features = squad_windows.create_features([], tokenizer, max_seq_length=16)
    assert len(features) == 0
    assert features.token_ids.shape == (0, 16) and features.token_to_char.shape == (0, 16, 2)


def test_bad_lengths_are_rejected(tokenizer):
    long_question = _example(LETTERS, question="a b c d e", qas_id="long")
    with pytest.raises(ValueError, match=r"example 0 \(long\): a question of 5 tokens leaves no"):
        squad_windows.create_features([long_question], tokenizer, max_seq_length=8)
    with pytest.raises(ValueError, match="max_query_length"):
        squad_windows.create_features([_example(LETTERS)], tokenizer, max_query_length=0)
    with pytest.raises(ValueError, match="doc_stride"):
        squad_windows.create_features([_example(LETTERS)], tokenizer, max_seq_length=8,
                                      doc_stride=0)


def test_real_dev_labels_decode_to_the_gold_answers(shared_file, tokenizer):
    examples, _ = squad_reader.read_squad(shared_file(*DEV))
    examples = examples[:2000]
    features = squad_windows.create_features(examples, tokenizer)
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
    examples, _ = squad_reader.read_squad(shared_file(*DEV))
    features = squad_windows.create_features(examples, tokenizer)
    assert len(features) == 10833
    assert features.token_ids.shape == (10833, 384)
    np.testing.assert_array_equal(np.unique(features.example_index), np.arange(10570))
    # Each context token is at its maximum context in exactly one window.
    per_example = np.bincount(features.example_index, weights=features.max_context.sum(1))
    num_tokens = tokenizer.tokenize([e.context for e in examples]).row_lengths().numpy()
    np.testing.assert_array_equal(per_example, num_tokens)


def test_v2_sample_features_label_impossible_questions_with_cls(shared_file, tokenizer):
    examples, _ = squad_reader.read_squad(shared_file(*V2_SAMPLE))
    features = squad_windows.create_features(examples, tokenizer)
    for index, example in enumerate(examples):
        windows = features.example_index == index
        labelled = features.start_positions[windows] > 0
        assert labelled.any() != example.is_impossible, example.qas_id
