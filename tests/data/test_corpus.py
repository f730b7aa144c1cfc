"""Tests for bert_tf.data.corpus on the real corpora in ../shared/data/corpus."""

import glob
import os

import pytest
import tensorflow as tf

from bert_tf.data import corpus


def _python_documents(path):
    """Reference grouping in plain Python: stripped lines, blank line = break."""
    documents, current = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                documents.append(current)
                current = []
    if current:
        documents.append(current)
    return documents


def _collect(dataset):
    return [[s.decode("utf-8") for s in doc.numpy().tolist()] for doc in dataset]


def test_sample_text_has_three_documents(shared_file):
    path = shared_file("corpus", "sample_text.txt")
    dataset = corpus.document_dataset(path)
    assert dataset.element_spec == tf.TensorSpec([None], tf.string)
    documents = _collect(dataset)
    assert [len(d) for d in documents] == [3, 13, 15]
    assert documents[0][0].startswith("This text is included to make sure Unicode")
    assert "力加勝北区" in documents[0][0]
    assert documents[1][-1] == "Like most of his fellow gold-seekers, Cass was superstitious."
    assert documents[2][0] == "The fountain of classic wisdom, Hypatia herself."


@pytest.mark.parametrize(
    "parts, expected_documents",
    [
        (("corpus", "moby-dick", "moby-dick.txt"), 2557),
        (("corpus", "wikitext-2", "valid.txt"), 1160),
        (("corpus", "wikitext-2", "test.txt"), 1320),
    ],
)
def test_matches_python_reader(shared_file, parts, expected_documents):
    path = shared_file(*parts)
    documents = _collect(corpus.document_dataset([path]))
    assert len(documents) == expected_documents
    assert documents == _python_documents(path)


def test_sotu_one_document_per_file_in_file_order(shared_file):
    folder = os.path.dirname(shared_file("corpus", "sotu", "2016_barack_obama_d.txt"))
    pattern = os.path.join(folder, "*.txt")
    files = corpus.list_files(pattern)
    assert len(files) == 233
    assert files == sorted(files)
    documents = _collect(corpus.document_dataset(pattern, cycle_length=4))
    assert len(documents) == 233
    # Each speech is one line, so each file is one single-sentence document;
    # with one document per file the interleave keeps the file order.
    assert all(len(d) == 1 for d in documents)
    assert documents == [_python_documents(f)[0] for f in files]


def test_interleave_order_is_round_robin_and_deterministic(shared_file):
    moby = shared_file("corpus", "moby-dick", "moby-dick.txt")
    sample = shared_file("corpus", "sample_text.txt")
    a, b = _python_documents(moby), _python_documents(sample)
    # cycle_length=2, block_length=2: two documents from each file in turn,
    # then the rest of the longer file.
    expected = a[0:2] + b[0:2] + a[2:4] + b[2:3] + a[4:]
    dataset = corpus.document_dataset([moby, sample], cycle_length=2, block_length=2)
    assert _collect(dataset) == expected
    assert _collect(dataset) == expected  # a second pass gives the same order


def test_shard_by_file_when_enough_files(shared_file):
    pattern = os.path.join(
        os.path.dirname(shared_file("corpus", "sotu", "1790_george_washington_n.txt")), "*.txt"
    )
    everything = _collect(corpus.document_dataset(pattern))
    shards = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
        shards.append(_collect(corpus.document_dataset(pattern, input_context=context)))
    assert [len(s) for s in shards] == [117, 116]
    # Pipeline i reads files i, i+2, ...: each speech is in exactly one shard.
    assert shards[0] == everything[0::2]
    assert shards[1] == everything[1::2]


def test_shard_by_element_when_fewer_files_than_pipelines(shared_file):
    sample = shared_file("corpus", "sample_text.txt")
    documents = _python_documents(sample)
    shards = [
        _collect(
            corpus.document_dataset(
                sample, input_context=tf.distribute.InputContext(2, pipeline, 1)
            )
        )
        for pipeline in range(2)
    ]
    assert shards == [[documents[0], documents[2]], [documents[1]]]


def test_shuffled_files_are_reproducible(shared_file):
    pattern = os.path.join(
        os.path.dirname(shared_file("corpus", "sotu", "1790_george_washington_n.txt")), "*.txt"
    )
    plain = _collect(corpus.document_dataset(pattern))
    first = _collect(corpus.document_dataset(pattern, shuffle_files=True, seed=7))
    second = _collect(corpus.document_dataset(pattern, shuffle_files=True, seed=7))
    assert first == second
    assert first != plain
    assert sorted(map(tuple, first)) == sorted(map(tuple, plain))


def test_whitespace_blank_lines_and_file_ends(tmp_path):
    (tmp_path / "a.txt").write_text(
        "\n\n  First sentence.  \nSecond one.\t\n \t \n\n\nNext document.\r\nLast line no newline",
        encoding="utf-8",
    )
    (tmp_path / "b.txt").write_text("", encoding="utf-8")
    (tmp_path / "c.txt").write_text("\n   \n", encoding="utf-8")
    (tmp_path / "d.txt").write_text("Only one.\n", encoding="utf-8")
    documents = _collect(corpus.document_dataset(str(tmp_path / "*.txt"), cycle_length=1))
    assert documents == [
        ["First sentence.", "Second one."],
        ["Next document.", "Last line no newline"],
        ["Only one."],
    ]


def test_list_files_keeps_pattern_order_without_duplicates(tmp_path):
    for name in ("x1.txt", "x2.txt", "y.txt"):
        (tmp_path / name).write_text("s\n", encoding="utf-8")
    (tmp_path / "x3.txt").mkdir()  # a folder caught by the glob is skipped
    files = corpus.list_files([str(tmp_path / "y.txt"), str(tmp_path / "x*.txt")])
    assert [os.path.basename(f) for f in files] == ["y.txt", "x1.txt", "x2.txt"]


def test_missing_file_is_a_clear_error_at_construction(tmp_path):
    missing = str(tmp_path / "nope" / "*.txt")
    with pytest.raises(ValueError, match="matches no file") as error:
        corpus.document_dataset([missing])
    assert missing in str(error.value)
    with pytest.raises(ValueError, match="matches only directories"):
        corpus.list_files(str(tmp_path))
    with pytest.raises(ValueError, match="no corpus file pattern given"):
        corpus.list_files([])
    with pytest.raises(ValueError, match="cycle_length must be a positive integer"):
        corpus.document_dataset(str(tmp_path), cycle_length=0)


def test_glob_helper_agrees_with_python_glob(shared_file):
    folder = os.path.dirname(shared_file("corpus", "wikitext-2", "test.txt"))
    pattern = os.path.join(folder, "*.txt")
    assert corpus.list_files(pattern) == sorted(glob.glob(pattern))


def test_empty_corpus_is_an_error_naming_the_files(tmp_path, caplog):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n  \n\t\n")
    with pytest.raises(ValueError, match=r"the corpus is empty: .*blank\.txt.*empty\.txt"):
        corpus.document_dataset(str(tmp_path / "*.txt"))
    # One empty shard among real ones is skipped, with a warning naming it.
    (tmp_path / "good.txt").write_text("One sentence.\n")
    with caplog.at_level("WARNING"):
        corpus.document_dataset(str(tmp_path / "*.txt"))
    assert "empty.txt is empty" in caplog.text
