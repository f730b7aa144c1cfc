"""Tests for bert_tf.tasks.conll_metrics: conlleval chunking and scores."""

import pytest

from bert_tf.data import conll2003
from bert_tf.tasks import conll_metrics


@pytest.mark.parametrize("labels, expected", [
    # IOB1: a type change ends a chunk and starts another.
    (["I-PER", "I-PER", "I-LOC"], [("PER", 0, 2), ("LOC", 2, 3)]),
    # IOB1: B- after I- of the same type starts a new chunk.
    (["I-PER", "B-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
    (["I-PER", "O", "I-PER"], [("PER", 0, 1), ("PER", 2, 3)]),
    # IOB2.
    (["B-PER", "I-PER", "B-LOC", "I-LOC", "O"], [("PER", 0, 2), ("LOC", 2, 4)]),
    (["B-PER", "B-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
    # A type change inside IOB2 ends the chunk; the I- tag starts a new one.
    (["B-PER", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 2)]),
    # A chunk open at the end of the sentence ends there.
    (["O", "O", "I-MISC"], [("MISC", 2, 3)]),
    (["O", "O"], []),
    ([], []),
    # Types are free text, not limited to the CoNLL-2003 four.
    (("B-DATE", "I-DATE"), [("DATE", 0, 2)]),
])
def test_chunks_follow_conlleval(labels, expected):
    assert conll_metrics.chunks(labels) == expected


@pytest.mark.parametrize("label", ["PER", "X-PER", "B-", "", "o", None])
def test_chunks_reject_malformed_labels(label):
    with pytest.raises(ValueError, match=r"label 1 is .*expected 'O', 'B-TYPE' or 'I-TYPE'"):
        conll_metrics.chunks(["O", label])


def test_to_iob2():
    assert conll_metrics.to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG"]) == [
        "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
    iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-MISC"]
    assert conll_metrics.to_iob2(iob2) == iob2
    assert conll_metrics.to_iob2(()) == []


def test_evaluate_hand_made_case():
    gold = [["I-PER", "I-PER", "O", "I-LOC"], ["I-ORG", "I-ORG", "B-ORG", "O"]]
    predicted = [["I-PER", "O", "O", "I-LOC"], ["B-ORG", "I-ORG", "B-ORG", "I-MISC"]]
    # Gold chunks: PER[0,2) LOC[3,4) | ORG[0,2) ORG[2,3)                 -> 4
    # Predicted:   PER[0,1) LOC[3,4) | ORG[0,2) ORG[2,3) MISC[3,4)       -> 5
    # Correct:     LOC[3,4) ORG[0,2) ORG[2,3) (PER differs in its end)   -> 3
    # precision 3/5 = 0.6, recall 3/4 = 0.75, F1 = 2*0.6*0.75/1.35 = 2/3.
    # Tokens: 8, equal tags: 3 + 2 (I-ORG vs B-ORG and O vs I-MISC differ) -> 5/8.
    result = conll_metrics.evaluate(gold, predicted)
    assert result["found_gold"] == 4
    assert result["found_predicted"] == 5
    assert result["correct"] == 3
    assert result["precision"] == pytest.approx(0.6)
    assert result["recall"] == pytest.approx(0.75)
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["accuracy"] == pytest.approx(0.625)
    assert result["per_type"] == {
        "LOC": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
        # MISC: 0 correct of 1 predicted, no gold chunk: every ratio is 0.
        "MISC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0},
        "ORG": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2},
        "PER": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
    }


def test_evaluate_iob1_gold_against_iob2_prediction_is_perfect():
    # The same chunks written in both schemes: conlleval scores chunks, so F1
    # is 1, while token accuracy sees I-PER != B-PER (2 of 4 tokens differ).
    gold = [["I-PER", "I-PER", "O", "I-LOC"]]
    result = conll_metrics.evaluate(gold, [conll_metrics.to_iob2(gold[0])])
    assert result["f1"] == 1.0
    assert result["accuracy"] == 0.5


def test_evaluate_errors():
    with pytest.raises(ValueError, match="2 gold sequences but 1 predicted"):
        conll_metrics.evaluate([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: 2 gold labels but 1 predicted"):
        conll_metrics.evaluate([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="sentence 0: label 0 is 'PER'"):
        conll_metrics.evaluate([["O"]], [["PER"]])
    with pytest.raises(ValueError, match="nothing to evaluate"):
        conll_metrics.evaluate([[]], [[]])


@pytest.mark.parametrize("name, chunks, per_type", [
    # Measured; equal to the counts in the CoNLL-2003 paper (Tjong Kim Sang
    # and De Meulder, 2003, table 2).
    ("eng.testa", 5942, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
    ("eng.testb", 5648, {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}),
])
def test_gold_against_gold_on_real_files(shared_file, name, chunks, per_type):
    gold = [s.labels for s in conll2003.read_conll(shared_file("conll2003", name))]
    result = conll_metrics.evaluate(gold, gold)
    assert (result["precision"], result["recall"], result["f1"], result["accuracy"]) == (
        1.0, 1.0, 1.0, 1.0)
    assert result["found_gold"] == result["found_predicted"] == result["correct"] == chunks
    assert {kind: scores["support"] for kind, scores in result["per_type"].items()} == per_type


def test_all_outside_prediction_on_testa(shared_file):
    gold = [s.labels for s in conll2003.read_conll(shared_file("conll2003", "eng.testa"))]
    result = conll_metrics.evaluate(gold, [["O"] * len(labels) for labels in gold])
    assert (result["precision"], result["recall"], result["f1"]) == (0.0, 0.0, 0.0)
    assert result["found_predicted"] == 0
    # 42,759 of the 51,362 tokens are tagged O (`awk 'NF==4' | grep -c ' O$'` minus
    # the 216 -DOCSTART- rows).
    assert result["accuracy"] == pytest.approx(42759 / 51362)


def test_to_iob2_on_real_train_keeps_chunks_and_uses_all_labels(shared_file):
    sentences = conll2003.read_conll(shared_file("conll2003", "eng.train"))
    converted = [conll_metrics.to_iob2(s.labels) for s in sentences]
    assert {label for labels in converted for label in labels} == set(conll2003.CONLL_LABELS)
    assert all(conll_metrics.chunks(new) == conll_metrics.chunks(s.labels)
               for new, s in zip(converted, sentences))
    # IOB2 never has I- after O.
    assert not any(previous == "O" and label.startswith("I-")
                   for labels in converted for previous, label in zip(["O"] + labels, labels))


def test_to_iob1_writes_the_original_conll_scheme():
    # Chunks start with I-, except one touching a chunk of the same type.
    assert conll_metrics.to_iob1(["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]) == [
        "I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
    labels = ["I-MISC", "B-MISC", "O", "I-ORG", "I-ORG", "I-LOC"]
    assert conll_metrics.to_iob1(conll_metrics.to_iob2(labels)) == labels


def test_iob1_round_trip_on_the_real_files(shared_file):
    for sentence in conll2003.read_conll(shared_file("conll2003", "eng.testa")):
        labels = list(sentence.labels)
        assert conll_metrics.to_iob1(conll_metrics.to_iob2(labels)) == labels
