"""Every task kind: the export, loaded in a fresh process that imports only
tensorflow and tensorflow_text, gives the in-memory Keras model's outputs.

Expected values come from the model called on features built directly with
the project's tokenizer and packer, and plain Python for spans and words.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.text.segment_packer import SegmentPacker

# Each test reads the outputs of one fresh-process run of every export.
pytestmark = [pytest.mark.slow, pytest.mark.long]

TOL = 1e-5
HERE = os.path.dirname(os.path.abspath(__file__))

LONG = " ".join(["word"] * 40)  # longer than every max_seq_length: truncated
TEXTS = ["The film is a delight from start to finish.",
         "Ünïcode café — ß, µ and 東京 in one line",
         "",
         LONG]
PAIRS = ["A second sentence.", "", "Zürich", "short"]
QUESTIONS = ["Where is the tower?", "Wann wurde er gebaut?", "", "x"]
CONTEXTS = ["Die Türme stehen in Paris, Frankreich, seit 1889.",
            "The Eiffel Tower was completed in 1889 and stands in Paris.",
            "",
            LONG + " Ünïcode"]
NER_TEXTS = ["John  lives in\tZürich", "", "Ünïcode\u00a0words: São Paulo!", LONG]
CHOICES = [["goes home", "eats a sandwich", "ß"], ["", "a", "b c"],
           ["x", "y", "z"], [LONG, "1", "2"]]


def _inputs(kind):
    return {
        "classifier": {"text": TEXTS, "text_pair": PAIRS},
        "regressor": {"text": TEXTS},
        "span_labeler": {"question": QUESTIONS, "context": CONTEXTS},
        "token_classifier": {"text": NER_TEXTS},
        "multiple_choice": {"context": TEXTS, "choices": CHOICES},
        "encoder": {"text": TEXTS},
    }[kind]


def _empty(kind, info):
    return {name: [0, info.num_choices] if name == "choices" else [0]
            for name in _inputs(kind)}


@pytest.fixture(scope="module")
def served(exports, tmp_path_factory):
    """Outputs of every export's serving_default, computed in a fresh process."""
    request = {"exports": {kind: path for kind, (_, _, path) in exports.items()},
               "inputs": {kind: _inputs(kind) for kind in exports},
               "empty": {kind: _empty(kind, info) for kind, (_, info, _) in exports.items()}}
    path = tmp_path_factory.mktemp("fresh") / "request.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run([sys.executable, os.path.join(HERE, "fresh_process_predict.py"),
                          str(path)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _features(tokenizer, info, segments):
    packer = SegmentPacker.from_tokenizer(tokenizer, info.max_seq_length)
    return packer([tokenizer.tokenize(np.array(s, dtype=object)) for s in segments])


def _np(x):
    return np.asarray(x, np.float64)


def test_fresh_process_does_not_import_bert_tf(served):
    assert served["modules"] == []


def test_classifier(exports, tokenizer, served):
    model, info, _ = exports["classifier"]
    logits = _np(model(_features(tokenizer, info, [TEXTS, PAIRS]))["logits"])
    out = served["classifier"]
    assert np.max(np.abs(_np(out["logits"]) - logits)) <= TOL
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert np.max(np.abs(_np(out["probabilities"]) - probabilities)) <= TOL
    assert out["label_id"] == logits.argmax(-1).tolist()
    assert out["label"] == [info.label_names[i] for i in logits.argmax(-1)]


def test_regressor(exports, tokenizer, served):
    model, info, _ = exports["regressor"]
    logits = _np(model(_features(tokenizer, info, [TEXTS]))["logits"])
    assert np.max(np.abs(_np(served["regressor"]["score"]) - logits[:, 0])) <= TOL


def test_encoder(exports, tokenizer, served):
    model, info, _ = exports["encoder"]
    features = _features(tokenizer, info, [TEXTS])
    expected = model(features)
    out = served["encoder"]
    assert np.max(np.abs(_np(out["pooled_output"]) - _np(expected["pooled_output"]))) <= TOL
    assert np.max(np.abs(_np(out["sequence_output"]) - _np(expected["sequence_output"]))) <= TOL
    assert out["padding_mask"] == np.asarray(features["padding_mask"]).tolist()
    # "the film is a delight from start to finish ." -> 10 pieces + [CLS] [SEP].
    assert sum(out["padding_mask"][0]) == 12


def test_multiple_choice(exports, tokenizer, served):
    model, info, _ = exports["multiple_choice"]
    contexts = [t for t in TEXTS for _ in range(3)]
    choices = [c for row in CHOICES for c in row]
    flat = _features(tokenizer, info, [contexts, choices])
    features = {k: np.reshape(v, (4, 3, -1)) for k, v in flat.items()}
    logits = _np(model(features)["logits"])
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    out = served["multiple_choice"]
    assert np.max(np.abs(_np(out["probabilities"]) - probabilities)) <= TOL
    assert out["choice_id"] == logits.argmax(-1).tolist()


def _char_offset(text, byte_offset):
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8"))


def test_span_labeler(exports, tokenizer, served):
    model, info, _ = exports["span_labeler"]
    out = served["span_labeler"]
    packer = SegmentPacker.from_tokenizer(tokenizer, info.max_seq_length)
    for row, (question, context) in enumerate(zip(QUESTIONS, CONTEXTS)):
        q_ids = tokenizer.tokenize(question).numpy()[:info.max_query_length]
        c_ids, starts, ends = (t.numpy() for t in tokenizer.tokenize_with_offsets(context))
        features = packer([q_ids, c_ids])
        logits = model({k: v[None] for k, v in features.items()})
        start, end = _np(logits["start_logits"])[0], _np(logits["end_logits"])[0]
        first = len(q_ids) + 2
        last = int(np.sum(features["padding_mask"])) - 2  # the last context piece
        best = (-np.inf, None, None)
        for i in range(first, last + 1):
            for j in range(i, min(last, i + info.max_answer_length - 1) + 1):
                if start[i] + end[j] > best[0]:
                    best = (start[i] + end[j], i, j)
        null = start[0] + end[0]
        assert abs(out["no_answer_score"][row] - null) <= TOL
        if best[1] is None:  # empty context: no span at all
            assert out["answer"][row] == "" and out["start_char"][row] == -1
            continue
        assert abs(out["score"][row] - best[0]) <= TOL
        if best[0] < null:
            got = (out["answer"][row], out["start_char"][row], out["end_char"][row])
            assert got == ("", -1, -1)
            continue
        start_char = _char_offset(context, starts[best[1] - first])
        end_char = _char_offset(context, ends[best[2] - first])
        assert (out["start_char"][row], out["end_char"][row]) == (start_char, end_char)
        assert out["answer"][row] == context[start_char:end_char]


def test_token_classifier(exports, tokenizer, served):
    model, info, _ = exports["token_classifier"]
    out = served["token_classifier"]
    packer = SegmentPacker.from_tokenizer(tokenizer, info.max_seq_length)
    for row, text in enumerate(NER_TEXTS):
        words = text.split()
        pieces = [tokenizer.tokenize(w).numpy().tolist() for w in words]
        features = packer(np.array(sum(pieces, []), np.int32))
        logits = _np(model({k: v[None] for k, v in features.items()})["logits"])[0]
        labels, position, cursor = [], 1, 0
        for word_pieces in pieces:
            position = 1 + cursor
            fits = word_pieces and position <= info.max_seq_length - 2
            labels.append(info.label_names[int(logits[position].argmax())] if fits else "")
            cursor += len(word_pieces)
        assert out["num_words"][row] == len(words)
        assert out["words"][row][:len(words)] == words
        assert out["labels"][row][:len(words)] == labels
        assert all(label == "" for label in out["labels"][row][len(words):])
        search_from, starts, ends = 0, [], []
        for word in words:
            start = text.index(word, search_from)
            starts.append(start)
            ends.append(start + len(word))
            search_from = start + len(word)
        assert out["word_start_char"][row][:len(words)] == starts
        assert out["word_end_char"][row][:len(words)] == ends


def test_token_classifier_offsets_literal(served):
    # "John  lives in\tZürich": two spaces, a tab, and a 2-byte ü.
    out = served["token_classifier"]
    assert out["word_start_char"][0][:5] == [0, 6, 12, 15, -1]
    assert out["word_end_char"][0][:5] == [4, 11, 14, 21, -1]
    assert out["num_words"] == [4, 0, 4, 40]


def test_empty_batch_every_kind(exports, served):
    for kind in exports:
        shapes = served[kind + "/empty"]
        assert shapes, kind
        assert all(shape[0] == 0 for shape in shapes.values()), (kind, shapes)
