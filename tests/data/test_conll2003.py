"""Tests for bert_tf.data.conll2003 on the real CoNLL-2003 files and hand-made ones."""

import os

import numpy as np
import pytest

from bert_tf.data import conll2003

_TAGS_WITHOUT_B_PER = {"O", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"}


def _write(tmp_path, text, name="sample.conll"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def test_labels_are_the_nine_tags_with_o_first():
    assert conll2003.CONLL_LABELS == (
        "O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


@pytest.mark.parametrize("name, sentences, documents, tokens", [
    ("eng.train", 14041, 946, 203621),
    ("eng.testa", 3250, 216, 51362),
    ("eng.testb", 3453, 231, 46435),
])
def test_real_files_sentence_and_document_counts(shared_file, name, sentences, documents, tokens):
    # Token counts: the 4-column rows (`awk 'NF==4'`) minus one -DOCSTART- row per document.
    read = conll2003.read_conll(shared_file("conll2003", name))
    assert len(read) == sentences
    assert read[-1].document == documents - 1
    assert sorted({s.document for s in read}) == list(range(documents))
    assert sum(len(s.words) for s in read) == tokens
    assert all(len(s.words) == len(s.labels) > 0 for s in read)


def test_real_train_first_sentences(shared_file):
    read = conll2003.read_conll(shared_file("conll2003", "eng.train"))
    assert read[0] == conll2003.ConllSentence(
        words=("EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."),
        labels=("I-ORG", "O", "I-MISC", "O", "O", "O", "I-MISC", "O", "O"),
        document=0,
    )
    assert read[1] == conll2003.ConllSentence(("Peter", "Blackburn"), ("I-PER", "I-PER"), 0)
    assert read[2].words == ("BRUSSELS", "1996-08-22")


def test_real_testa_first_sentence(shared_file):
    first = conll2003.read_conll(shared_file("conll2003", "eng.testa"))[0]
    assert first.words[:4] == ("CRICKET", "-", "LEICESTERSHIRE", "TAKE")
    assert first.labels[:4] == ("O", "O", "I-ORG", "O")


def test_real_train_label_set(shared_file):
    # The IOB1 training file never has two touching PER chunks, so B-PER is
    # absent; every other tag of CONLL_LABELS occurs (to_iob2 brings B-PER in,
    # see tests/tasks/test_conll_metrics.py).
    read = conll2003.read_conll(shared_file("conll2003", "eng.train"))
    assert {label for s in read for label in s.labels} == _TAGS_WITHOUT_B_PER
    assert _TAGS_WITHOUT_B_PER | {"B-PER"} == set(conll2003.CONLL_LABELS)


def test_documents_blank_lines_and_missing_final_break(tmp_path):
    path = _write(tmp_path, (
        "-DOCSTART- -X- -X- O\n\n"
        "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n\n\n"
        "Peter NNP I-NP I-PER\n\n"
        "-DOCSTART- -X- -X- O\n"
        "-DOCSTART- -X- -X- O\n\n"
        "Blackburn NNP I-NP I-PER"
    ))
    assert conll2003.read_conll(path) == [
        conll2003.ConllSentence(("EU", "rejects"), ("I-ORG", "O"), 0),
        conll2003.ConllSentence(("Peter",), ("I-PER",), 0),
        conll2003.ConllSentence(("Blackburn",), ("I-PER",), 1),
    ]


def test_file_without_docstart_and_with_crlf_is_one_document(tmp_path):
    path = _write(tmp_path, "a DT I-NP O\r\nb NN I-NP I-LOC\r\n\r\nc NN I-NP B-LOC\r\n")
    assert conll2003.read_conll(path) == [
        conll2003.ConllSentence(("a", "b"), ("O", "I-LOC"), 0),
        conll2003.ConllSentence(("c",), ("B-LOC",), 0),
    ]


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, "-DOCSTART- -X- -X- O\n\nEU NNP I-NP I-ORG\nrejects VBZ O\n")
    with pytest.raises(ValueError, match=r"sample\.conll:4: expected 4 columns .* found 3"):
        conll2003.read_conll(path)


def test_unknown_tag_names_file_and_line(tmp_path):
    path = _write(tmp_path, "EU NNP I-NP I-ORG\n\nPeter NNP I-NP I-PERSON\n")
    with pytest.raises(ValueError, match=r"sample\.conll:3: unknown NER tag 'I-PERSON'"):
        conll2003.read_conll(path)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = _write(tmp_path, b"EU NNP I-NP I-ORG\nM\xfcller NNP I-NP I-PER\n")
    with pytest.raises(ValueError, match=r"sample\.conll:2: not valid UTF-8"):
        conll2003.read_conll(path)


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- -X- O\n\n"])
def test_file_without_sentences_is_an_error(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"sample\.conll: no sentences found"):
        conll2003.read_conll(path)


def test_write_predictions_conlleval_format(tmp_path):
    sentences = [
        conll2003.ConllSentence(("EU", "rejects"), ("I-ORG", "O"), 0),
        conll2003.ConllSentence(("Peter", "Blackburn"), ("I-PER", "I-PER"), 0),
    ]
    path = str(tmp_path / "predictions.txt")
    conll2003.write_predictions(path, sentences, [["B-ORG", "O"], ("B-PER", "O")])
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == (
            "EU I-ORG B-ORG\nrejects O O\n\nPeter I-PER B-PER\nBlackburn I-PER O\n\n")
    assert os.listdir(tmp_path) == ["predictions.txt"]


def test_write_predictions_rejects_mismatches(tmp_path):
    sentences = [conll2003.ConllSentence(("EU", "rejects"), ("I-ORG", "O"), 0)]
    path = str(tmp_path / "predictions.txt")
    with pytest.raises(ValueError, match="1 sentences but 2 sequences"):
        conll2003.write_predictions(path, sentences, [["O", "O"], ["O"]])
    with pytest.raises(ValueError, match="sentence 0: 2 words but 1 predicted labels"):
        conll2003.write_predictions(path, sentences, [["O"]])
    with pytest.raises(ValueError, match="sentence 0, token 1: predicted label 'B ORG'"):
        conll2003.write_predictions(path, sentences, [["O", "B ORG"]])
    assert not os.path.exists(path)


def _tokenizer(shared_file):
    from bert_tf.text.tokenizer import BertTokenizer

    return BertTokenizer(shared_file("vocab", "bert-base-uncased-vocab.txt"), lower_case=True)


def test_featurize_labels_each_words_first_piece(shared_file):
    tokenizer = _tokenizer(shared_file)
    sentences = [
        conll2003.ConllSentence(("Huckleberry", "visits", "U.S."), ("I-PER", "O", "I-LOC"), 0),
        conll2003.ConllSentence(("word",) * 10, ("O",) * 10, 0)]
    tags = [("B-PER", "O", "B-LOC"), ("O",) * 10]
    features = conll2003.featurize(sentences, tokenizer, 10, tags)
    table = features.table
    assert table["index"].tolist() == [0, 1]
    # hu ##ckle ##berry visits u . s . fill 10 slots with [CLS] and [SEP].
    pieces = [tokenizer.vocab[i] for i in table["token_ids"][0] if i]
    assert pieces == ["[CLS]", "hu", "##ckle", "##berry", "visits", "u", ".", "s", ".", "[SEP]"]
    assert table["padding_mask"][0].tolist() == [1] * 10
    assert features.word_positions == [[1, 4, 5], [1, 2, 3, 4, 5, 6, 7, 8, -1, -1]]
    assert np.flatnonzero(table["label_weights"][0]).tolist() == [1, 4, 5]
    assert [conll2003.CONLL_LABELS[i] for i in table["label_ids"][0][[1, 4, 5]]] == list(tags[0])
    # The words cut by max_seq_length carry no weight.
    assert table["label_weights"][1].tolist() == [0] + [1] * 8 + [0]


@pytest.mark.parametrize("tags, message", [
    ([("O",)], r"sentence 0: 2 words but 1 tags"),
    ([("O", "B-FOO")], r"sentence 0: tag 'B-FOO' is not one of"),
    ([], r"1 sentences but 0 tag sequences"),
])
def test_featurize_rejects_tags_that_do_not_fit(shared_file, tags, message):
    sentence = conll2003.ConllSentence(("a", "b"), ("O", "O"), 0)
    with pytest.raises(ValueError, match=message):
        conll2003.featurize([sentence], _tokenizer(shared_file), 8, tags)
