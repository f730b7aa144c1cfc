"""Tests for bert_tf.tasks.squad_postprocess: n-best answers from span logits."""

import functools
import json
import math

import numpy as np
import pytest

from bert_tf.data import squad
from bert_tf.tasks import squad_metrics, squad_postprocess

CONTEXT = "Alpha Beta gamma delta"
# Char spans of its four tokens.
ALPHA, BETA, GAMMA, DELTA = (0, 5), (6, 10), (11, 16), (17, 22)


def _example(context=CONTEXT, qas_id="q1"):
    return squad.SquadExample(qas_id, "Which?", context, ())


def _features(windows, length=8):
    """SquadFeatures of hand-made windows [CLS] q [SEP] tokens... [SEP].

    `windows` is a list of (example_index, [(char span, max_context), ...]);
    context tokens start at position 3, padding follows the last [SEP]. Only
    the fields post-processing reads are meaningful.
    """
    num = len(windows)
    token_to_char = np.full((num, length, 2), -1, np.int32)
    max_context = np.zeros((num, length), bool)
    padding_mask = np.zeros((num, length), np.int32)
    for f, (_, tokens) in enumerate(windows):
        for t, (chars, is_max) in enumerate(tokens):
            token_to_char[f, 3 + t] = chars
            max_context[f, 3 + t] = is_max
        padding_mask[f, :3 + len(tokens) + 1] = 1
    zeros = np.zeros((num, length), np.int32)
    return squad.SquadFeatures(
        token_ids=zeros, segment_ids=zeros, padding_mask=padding_mask,
        example_index=np.array([w[0] for w in windows], np.int32),
        token_to_char=token_to_char, max_context=max_context,
        start_positions=np.zeros(num, np.int32), end_positions=np.zeros(num, np.int32))


ONE_WINDOW = [(0, [(ALPHA, True), (BETA, True), (GAMMA, True), (DELTA, True)])]
#                     CLS  q  SEP Alpha Beta gamma delta SEP
START = np.array([[0., 0., 0., 1., 5., 2., 0., 0.]])
END = np.array([[7., 6., 0., 0., 3., 4., 0., 0.]])


def test_best_span_is_the_original_context_substring():
    predictions, nbest, null_odds = squad_postprocess.predict_answers(
        [_example()], _features(ONE_WINDOW), START, END)
    # [CLS] and question ends score higher but are not in the context.
    assert predictions == {"q1": "Beta gamma"}
    assert null_odds == {}
    texts = [(e["text"], e["start_logit"] + e["end_logit"]) for e in nbest["q1"]]
    assert texts == [("Beta gamma", 9), ("Beta", 8), ("gamma", 6), ("Beta gamma delta", 5),
                     ("Alpha Beta gamma", 5), ("Alpha Beta", 4), ("gamma delta", 2), ("Alpha", 1),
                     ("Alpha Beta gamma delta", 1), ("delta", 0)]
    assert nbest["q1"][0]["start_char"] == 6 and nbest["q1"][0]["end_char"] == 16
    assert math.isclose(sum(e["probability"] for e in nbest["q1"]), 1.0)


def test_n_best_size_limits_candidates_and_probabilities_are_a_softmax():
    _, nbest, _ = squad_postprocess.predict_answers(
        [_example()], _features(ONE_WINDOW), START, END, n_best_size=3)
    # Top-3 starts: Beta, gamma, Alpha; top-3 ends: [CLS], question, gamma.
    assert [e["text"] for e in nbest["q1"]] == ["Beta gamma", "gamma", "Alpha Beta gamma"]
    # softmax([9, 6, 5])
    np.testing.assert_allclose([e["probability"] for e in nbest["q1"]],
                               [0.936239, 0.046613, 0.017148], atol=1e-6)


def test_max_answer_length_and_max_context_filter_spans():
    predictions, _, _ = squad_postprocess.predict_answers(
        [_example()], _features(ONE_WINDOW), START, END, max_answer_length=1)
    assert predictions == {"q1": "Beta"}
    # Beta is not at its maximum context here: no span may start on it.
    not_max = [(0, [(ALPHA, True), (BETA, False), (GAMMA, True), (DELTA, True)])]
    predictions, nbest, _ = squad_postprocess.predict_answers(
        [_example()], _features(not_max), START, END)
    assert predictions == {"q1": "gamma"}
    assert not any(e["text"].startswith("Beta") for e in nbest["q1"])


def test_answer_from_the_window_where_the_start_has_max_context():
    windows = [(0, [(ALPHA, True), (BETA, False)]),
               (0, [(BETA, True), (GAMMA, True), (DELTA, True)])]
    start = np.array([[0, 0, 0, 2, 10, 0, 0, 0], [0, 0, 0, 3, 0, 0, 0, 0]], float)
    end = np.array([[0, 0, 0, 0, 2, 0, 0, 0], [0, 0, 0, 0, 0, 3, 0, 0]], float)
    predictions, nbest, _ = squad_postprocess.predict_answers(
        [_example()], _features(windows), start, end)
    assert predictions == {"q1": "Beta gamma delta"}
    assert nbest["q1"][1]["text"] == "Alpha Beta"


def test_equal_texts_are_listed_once():
    context = "red or red"
    windows = [(0, [((0, 3), True), ((4, 6), True), ((7, 10), True)])]
    start = np.array([[0, 0, 0, 5, 0, 5, 0, 0]], float)
    end = np.array([[0, 0, 0, 5, 0, 5, 0, 0]], float)
    _, nbest, _ = squad_postprocess.predict_answers(
        [_example(context)], _features(windows), start, end)
    texts = [e["text"] for e in nbest["q1"]]
    assert texts[0] == "red" and texts.count("red") == 1
    assert (nbest["q1"][0]["start_char"], nbest["q1"][0]["end_char"]) == (0, 3)


def test_v2_null_answer_against_threshold():
    windows = [(0, [(ALPHA, True), (BETA, False)]),
               (0, [(BETA, True), (GAMMA, True), (DELTA, True)])]
    # Null scores: 1.0 + 0.5 in window 0, 0.5 + 0.25 in window 1 -> 0.75.
    start = np.array([[1, 0, 0, 0, 0, 0, 0, 0], [0.5, 0, 0, 0.25, 0, 0, 0, 0]])
    end = np.array([[0.5, 0, 0, 0, 0, 0, 0, 0], [0.25, 0, 0, 0.25, 0, 0, 0, 0]])
    args = ([_example()], _features(windows), start, end)
    predictions, nbest, null_odds = squad_postprocess.predict_answers(
        *args, version_2_with_negative=True)
    # Best span "Beta" scores 0.5: null odds 0.75 - 0.5 = 0.25 > 0.
    assert null_odds == {"q1": 0.25}
    assert predictions == {"q1": ""}
    assert nbest["q1"][0] == {"text": "", "probability": nbest["q1"][0]["probability"],
                              "start_logit": 0.5, "end_logit": 0.25, "start_char": -1,
                              "end_char": -1}
    assert nbest["q1"][1]["text"] == "Beta"
    predictions, _, _ = squad_postprocess.predict_answers(
        *args, version_2_with_negative=True, null_score_diff_threshold=0.25)
    assert predictions == {"q1": "Beta"}


def test_v2_null_entry_is_kept_beyond_n_best_and_without_spans():
    end = np.array([[1., 0., 0., 0., 3., 4., 0., 0.]])  # null score 0 + 1
    predictions, nbest, null_odds = squad_postprocess.predict_answers(
        [_example()], _features(ONE_WINDOW), START, end, n_best_size=1,
        version_2_with_negative=True)
    assert [e["text"] for e in nbest["q1"]] == ["Beta gamma", ""]
    assert null_odds == {"q1": 1.0 - 9.0} and predictions == {"q1": "Beta gamma"}
    nowhere = [(0, [(ALPHA, False)])]
    predictions, nbest, null_odds = squad_postprocess.predict_answers(
        [_example()], _features(nowhere), START, END, version_2_with_negative=True)
    assert predictions == {"q1": ""} and null_odds == {"q1": math.inf}
    assert [e["text"] for e in nbest["q1"]] == [""]
    predictions, nbest, _ = squad_postprocess.predict_answers(
        [_example()], _features(nowhere), START, END)
    assert predictions == {"q1": ""} and nbest["q1"][0]["probability"] == 1.0


def test_logits_must_match_the_features():
    with pytest.raises(ValueError, match=r"start_logits has shape \(1, 7\); expected \(1, 8\)"):
        squad_postprocess.predict_answers(
            [_example()], _features(ONE_WINDOW), START[:, :7], END)


def test_write_predictions(tmp_path):
    paths = squad_postprocess.write_predictions(
        str(tmp_path / "out"), {"q1": "Beta"}, {"q1": [{"text": "Beta"}]}, {"q1": -1.5})
    assert sorted(paths) == ["nbest_predictions", "null_odds", "predictions"]
    assert json.loads(open(paths["predictions"], encoding="utf-8").read()) == {"q1": "Beta"}
    assert json.load(open(paths["null_odds"])) == {"q1": -1.5}
    assert json.load(open(paths["nbest_predictions"])) == {"q1": [{"text": "Beta"}]}
    paths = squad_postprocess.write_predictions(str(tmp_path / "v1"), {"q1": "é"}, {}, {})
    assert sorted(paths) == ["nbest_predictions", "predictions"]
    assert json.load(open(paths["predictions"], encoding="utf-8")) == {"q1": "é"}


@functools.cache
def _tokenizer(vocab_file):
    from bert_tf.text.tokenizer import BertTokenizer

    return BertTokenizer(vocab_file, lower_case=True)


def test_oracle_logits_on_real_dev_examples(shared_file):
    examples, _ = squad.read_squad(shared_file("squad", "dev-v1.1.json"))
    examples = examples[:500]
    tokenizer = _tokenizer(shared_file("vocab", "bert-base-uncased-vocab.txt"))
    features = squad.create_features(examples, tokenizer)
    rows = np.arange(len(features))
    start = np.zeros(features.token_ids.shape)
    end = np.zeros(features.token_ids.shape)
    start[rows, features.start_positions] = 10.0
    end[rows, features.end_positions] = 10.0
    predictions, _, _ = squad_postprocess.predict_answers(examples, features, start, end)
    scores = squad_metrics.evaluate(examples, predictions)
    assert scores["total"] == 500 and scores["missing"] == 0
    # Measured: EM 97.8, F1 97.8: the 11 misses are first gold answers cutting a
    # word ("gold" of "golden", "8" of "18"), which the span widens to whole tokens.
    assert scores["exact_match"] >= 97.8
    assert scores["f1"] >= 97.8


def test_padding_never_takes_an_n_best_slot():
    # Two context tokens, then padding whose logits beat every real one: with
    # n_best_size 2 the padded positions must not crowd out the real span.
    two_tokens = [(0, [(ALPHA, True), (BETA, True)])]
    #                  CLS  q    SEP  Alpha Beta SEP  pad pad
    start = np.array([[-9., -9., -9., -1., -3., -9., 5., 5.]])
    end = np.array([[-9., -9., -9., -3., -1., -9., 5., 5.]])
    predictions, nbest, _ = squad_postprocess.predict_answers(
        [_example()], _features(two_tokens), start, end, n_best_size=2)
    assert predictions == {"q1": "Alpha Beta"}
    assert [e["text"] for e in nbest["q1"]] == ["Alpha Beta", "Alpha"]


# A fake span model for the evaluation path below: logits by token id.
_PAD, _WORD, _ANSWER = 0, 1, 2
_LOGIT_OF_ID = np.array([0.0, -5.0, -1.0], np.float32)  # pad, other word, answer


def _window(context, answer_word, max_seq_length):
    """One window `[CLS] q [SEP] words [SEP]` of a space-separated context, as a row."""
    words = context.split(" ")
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    length = 3 + len(words) + 1
    token_ids = np.full(max_seq_length, _PAD, np.int32)
    token_ids[:length] = _WORD
    token_ids[3 + answer_word] = _ANSWER
    token_to_char = np.full((max_seq_length, 2), -1, np.int32)
    token_to_char[3:3 + len(words)] = np.stack([starts, starts + [len(w) for w in words]], -1)
    max_context = np.zeros(max_seq_length, bool)
    max_context[3:3 + len(words)] = True
    padding_mask = np.zeros(max_seq_length, np.int32)
    padding_mask[:length] = 1
    return token_ids, token_to_char, max_context, padding_mask


def test_short_window_evaluated_after_long_ones_keeps_its_answer():
    # Evaluation cuts each batch to its longest window and pads the batches
    # back to max_seq_length when concatenating them. The short windows'
    # answers score -1 + -1; everything past their 16 tokens (48 positions:
    # the model's logits on padding in batch 1, the concatenation's fill in
    # batch 2) must not outrank them, though 0 would take all 20 n-best slots.
    from bert_tf.tasks.squad import SquadDataConfig, SquadExperiment, SquadTask

    length = 64
    long_context = " ".join(f"w{i}" for i in range(length - 4))
    short_context = " ".join(f"s{i}" for i in range(12))
    examples = [squad.SquadExample("long", "Which?", long_context, ()),
                squad.SquadExample("short1", "Which?", short_context, ()),
                squad.SquadExample("short2", "Which?", short_context, ())]
    rows = [_window(long_context, 30, length), _window(short_context, 5, length),
            _window(short_context, 7, length)]
    token_ids, token_to_char, max_context, padding_mask = map(np.stack, zip(*rows))
    zeros = np.zeros(len(rows), np.int32)
    features = squad.SquadFeatures(
        token_ids=token_ids, segment_ids=np.zeros_like(token_ids), padding_mask=padding_mask,
        example_index=np.arange(len(rows), dtype=np.int32), token_to_char=token_to_char,
        max_context=max_context, start_positions=zeros, end_positions=zeros)
    task = SquadTask(SquadExperiment(data=SquadDataConfig(
        eval_file="dev.json", max_seq_length=length, dynamic_padding=True)))
    task._examples["dev.json"] = examples
    task._features["dev.json"] = features

    widths = []

    def predict_fn(inputs):
        ids = inputs["token_ids"].numpy()  # [B, cut length]
        widths.append(ids.shape[1])
        return {"start_logits": _LOGIT_OF_ID[ids], "end_logits": _LOGIT_OF_ID[ids]}

    outputs = task.predict_outputs(predict_fn, "dev.json", batch_size=2)
    assert widths == [64, 16]  # batch 2 really was cut, and padded back
    assert outputs["start_logits"].shape == (3, length)
    predictions, nbest, _ = task.answers("dev.json", outputs)
    assert predictions == {"long": "w30", "short1": "s5", "short2": "s7"}
    assert nbest["short2"][0]["start_logit"] == -1.0
