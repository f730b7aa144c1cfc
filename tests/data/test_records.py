"""Tests of bert_tf.data.records: the original BERT pretraining TFRecord format."""

import collections
import threading

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import records

S, P = 16, 4


def _example(i, nsp=True):
    """Deterministic features of example i, as numpy arrays (int32/float32)."""
    length = 8 + i % 8
    ids = np.zeros(S, np.int32)
    ids[:length] = [101] + [1000 + i * 10 + k for k in range(length - 2)] + [102]
    features = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.array([0] * (length // 2) + [1] * (length - length // 2)
                                + [0] * (S - length), np.int32),
        "masked_lm_positions": np.array([1, 2, 0, 0], np.int32),
        "masked_lm_ids": np.array([1000 + i * 10, 1001 + i * 10, 0, 0], np.int32),
        "masked_lm_weights": np.array([1, 1, 0, 0], np.float32),
    }
    if nsp:
        features["next_sentence_labels"] = np.int32(i % 2)
    return features


def _google_style_record(features):
    """Serializes like google-research/bert's write_instance_to_example_files."""
    def create_int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def create_float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

    out = collections.OrderedDict()
    out["input_ids"] = create_int_feature(features["input_ids"].tolist())
    out["input_mask"] = create_int_feature(features["input_mask"].tolist())
    out["segment_ids"] = create_int_feature(features["segment_ids"].tolist())
    out["masked_lm_positions"] = create_int_feature(features["masked_lm_positions"].tolist())
    out["masked_lm_ids"] = create_int_feature(features["masked_lm_ids"].tolist())
    out["masked_lm_weights"] = create_float_feature(features["masked_lm_weights"].tolist())
    out["next_sentence_labels"] = create_int_feature([int(features["next_sentence_labels"])])
    return tf.train.Example(features=tf.train.Features(feature=out)).SerializeToString()


def _write(paths, count, nsp=True):
    with records.PretrainingRecordWriter([str(p) for p in paths]) as writer:
        for i in range(count):
            writer.write(_example(i, nsp))
    return writer.counts


def _read_all(dataset):
    return list(dataset.as_numpy_iterator())


def _assert_example_equal(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_round_trip_and_file_types(tmp_path):
    counts = _write([tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"], 7)
    assert counts == [4, 3]  # round-robin
    raw = next(iter(tf.data.TFRecordDataset(str(tmp_path / "a.tfrecord")))).numpy()
    feature = tf.train.Example.FromString(raw).features.feature
    # As google-research/bert writes them: int64 lists, a float list, a 1-element label.
    assert feature["input_ids"].WhichOneof("kind") == "int64_list"
    assert feature["masked_lm_weights"].WhichOneof("kind") == "float_list"
    assert list(feature["next_sentence_labels"].int64_list.value) == [0]

    got = _read_all(records.read_pretraining_records(
        str(tmp_path / "a.tfrecord"), cycle_length=1))
    assert len(got) == 4
    for k, example in enumerate(got):
        _assert_example_equal(example, _example(2 * k))
        assert example["input_ids"].dtype == np.int32
        assert example["masked_lm_weights"].dtype == np.float32
        assert example["next_sentence_labels"].shape == ()


def test_reads_files_written_by_google_research_bert(tmp_path):
    path = tmp_path / "google.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(5):
            writer.write(_google_style_record(_example(i)))
    got = _read_all(records.read_pretraining_records(str(path), batch_size=5))
    assert len(got) == 1
    batch = got[0]
    assert batch["input_ids"].shape == (5, S) and batch["masked_lm_ids"].shape == (5, P)
    assert batch["next_sentence_labels"].tolist() == [0, 1, 0, 1, 0]
    for i in range(5):
        _assert_example_equal({k: v[i] for k, v in batch.items()}, _example(i))


def test_shapes_are_inferred_and_checked(tmp_path):
    _write([tmp_path / "a.tfrecord"], 3)
    assert records.record_shapes(_google_style_record(_example(0))) == (S, P, True)
    with pytest.raises(records.CorruptRecordError, match=r"a.tfrecord.*max_seq_length=16"):
        records.read_pretraining_records(str(tmp_path / "a.tfrecord"), max_seq_length=128)


def test_the_file_checks_give_counts_and_every_shape(tmp_path):
    paths = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord", tmp_path / "c.tfrecord"]
    _write(paths[:2], 5, nsp=False)
    paths[2].write_bytes(b"")  # an empty shard counts 0 and decides nothing
    files = [str(p) for p in paths]
    counts, shapes = records.check_record_files(files, records.RecordShapes())
    assert counts == [3, 2, 0]
    assert shapes == records.RecordShapes(max_seq_length=S, max_predictions_per_seq=P, nsp=False)
    with pytest.raises(records.CorruptRecordError, match=r"a\.tfrecord: holds examples with "
                                                         r"max_predictions_per_seq=4, expected 5"):
        records.check_record_files(files, records.RecordShapes(max_predictions_per_seq=5))
    # Without validation nothing is read: S and P must be given, NSP is assumed.
    assert records.check_record_files(["absent"], records.RecordShapes(8, 2), False) == (
        None, records.RecordShapes(8, 2, True))
    with pytest.raises(ValueError, match="required when validate=False"):
        records.check_record_files(files, records.RecordShapes(max_seq_length=S), False)


def test_without_nsp_labels(tmp_path):
    _write([tmp_path / "a.tfrecord"], 3, nsp=False)
    got = _read_all(records.read_pretraining_records(str(tmp_path / "a.tfrecord")))
    assert len(got) == 3 and "next_sentence_labels" not in got[0]


def test_batches_epochs_and_shuffling(tmp_path):
    paths = [tmp_path / f"s{i}.tfrecord" for i in range(4)]
    _write(paths, 40)
    pattern = str(tmp_path / "s*.tfrecord")
    batches = _read_all(records.read_pretraining_records(pattern, batch_size=16,
                                                         num_epochs=2))
    assert len(batches) == 5  # 80 examples, last partial batch dropped
    plain = _read_all(records.read_pretraining_records(pattern))
    shuffled = _read_all(records.read_pretraining_records(
        pattern, shuffle_files=True, shuffle_buffer_size=16, seed=3))
    again = _read_all(records.read_pretraining_records(
        pattern, shuffle_files=True, shuffle_buffer_size=16, seed=3))
    ids = lambda examples: [int(e["input_ids"][1]) for e in examples]  # noqa: E731
    assert sorted(ids(shuffled)) == sorted(ids(plain)) and ids(shuffled) != ids(plain)
    assert ids(shuffled) == ids(again)


def test_input_pipelines_read_disjoint_files(tmp_path):
    _write([tmp_path / f"s{i}.tfrecord" for i in range(4)], 40)
    seen = []
    for index in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=index,
                                             num_replicas_in_sync=2)
        batches = _read_all(records.read_pretraining_records(
            str(tmp_path / "s*.tfrecord"), batch_size=8, input_context=context))
        assert batches[0]["input_ids"].shape == (4, S)
        seen.append({int(i) for b in batches for i in b["input_ids"][:, 1]})
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 40
    context = tf.distribute.InputContext(num_input_pipelines=8, input_pipeline_id=0)
    with pytest.raises(ValueError, match="4 TFRecord files"):
        records.read_pretraining_records(str(tmp_path / "s*.tfrecord"), input_context=context)


# --- errors ------------------------------------------------------------------


def test_missing_files_fail_eagerly(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing"):
        records.read_pretraining_records(str(tmp_path / "nothing*.tfrecord"))
    with pytest.raises(FileNotFoundError, match="absent.tfrecord"):
        records.read_pretraining_records([str(tmp_path / "absent.tfrecord")])


def test_empty_files(tmp_path):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(records.CorruptRecordError, match="empty"):
        records.read_pretraining_records(str(tmp_path / "empty.tfrecord"))
    _write([tmp_path / "full.tfrecord"], 2)
    got = _read_all(records.read_pretraining_records(str(tmp_path / "*.tfrecord")))
    assert len(got) == 2


def _good_bytes(tmp_path, count=6):
    path = tmp_path / "good.tfrecord"
    _write([path], count)
    return path.read_bytes()


def _record_offsets(data):
    offsets, offset = [], 0
    while offset < len(data):
        offsets.append(offset)
        offset += 16 + int.from_bytes(data[offset:offset + 8], "little")
    return offsets


@pytest.mark.parametrize("where", ["inside_header", "inside_payload", "inside_footer"])
def test_truncated_file_is_named(tmp_path, where):
    data = _good_bytes(tmp_path)
    last = _record_offsets(data)[-1]
    cut = {"inside_header": last + 5, "inside_payload": last + 40,
           "inside_footer": len(data) - 2}[where]
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(data[:cut])
    if where == "inside_header":
        # TensorFlow's own reader takes this file for a valid, shorter one.
        assert len(list(tf.data.TFRecordDataset(str(path)))) == 5
    with pytest.raises(records.CorruptRecordError, match=r"cut.tfrecord: truncated"):
        records.read_pretraining_records(str(tmp_path / "*.tfrecord"))


def test_not_a_tfrecord_file_is_named(tmp_path):
    (tmp_path / "text.tfrecord").write_text("just some text, long enough to have a header\n")
    with pytest.raises(records.CorruptRecordError, match=r"text.tfrecord.*TFRecord file\?"):
        records.read_pretraining_records(str(tmp_path / "text.tfrecord"))


def test_foreign_records_are_named(tmp_path):
    path = tmp_path / "other.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(b"\x0a\x03not an example")
    with pytest.raises(records.CorruptRecordError, match="other.tfrecord"):
        records.read_pretraining_records(str(path))
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(tf.train.Example().SerializeToString())
    with pytest.raises(records.CorruptRecordError, match=r"other.tfrecord.*missing"):
        records.read_pretraining_records(str(path))


def _iterate_with_timeout(dataset, seconds=60):
    """Iterates in a thread so that a hang fails the test instead of blocking it."""
    outcome = {}

    def run():
        try:
            outcome["count"] = sum(1 for _ in dataset)
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "reading a corrupt file hung"
    return outcome


@pytest.mark.parametrize("batch_size", [None, 2])
def test_corrupt_payload_fails_at_read_time_naming_the_file(tmp_path, batch_size):
    _write([tmp_path / "a.tfrecord"], 6)
    data = bytearray(_good_bytes(tmp_path))
    offset = _record_offsets(bytes(data))[3]
    data[offset + 30] ^= 0xFF  # a bit flip in record 3's payload: its data CRC fails
    (tmp_path / "good.tfrecord").write_bytes(bytes(data))
    dataset = records.read_pretraining_records(str(tmp_path / "*.tfrecord"),
                                               batch_size=batch_size)
    outcome = _iterate_with_timeout(dataset)
    assert isinstance(outcome.get("error"), tf.errors.InvalidArgumentError)
    message = str(outcome["error"])
    assert "good.tfrecord" in message and "is a corrupt TFRecord file" in message
    assert "a.tfrecord" not in message


def test_scan_counts_records(tmp_path):
    data = _good_bytes(tmp_path, count=9)
    count, first = records.scan_record_file(str(tmp_path / "good.tfrecord"))
    assert count == 9 and len(_record_offsets(data)) == 9
    assert records.record_shapes(first) == (S, P, True)


def test_records_pack_into_rows_that_keep_every_example(tmp_path):
    from bert_tf.data.packing import PackingOptions

    _write([tmp_path / "a.tfrecord"], 12)
    rows = _read_all(records.read_pretraining_records(
        str(tmp_path / "a.tfrecord"), packing=PackingOptions(max_sequences_per_row=2, window=12)))
    # Lengths 8 + i % 8 in rows of 16: only examples 0 and 8 (8 tokens each) share a row.
    assert len(rows) == 11
    seen = []
    for row in rows:
        index = row["input_mask"]
        for k in range(1, index.max() + 1):
            start, length = int(np.argmax(index == k)), int((index == k).sum())
            i = (int(row["input_ids"][start + 1]) - 1000) // 10
            want = _example(i)
            np.testing.assert_array_equal(row["input_ids"][start:start + length],
                                          want["input_ids"][:length])
            taken = row["masked_lm_weights"] > 0
            in_slot = taken & (row["masked_lm_positions"] >= start) & (
                row["masked_lm_positions"] < start + length)
            assert (row["masked_lm_positions"][in_slot] - start).tolist() == [1, 2]
            assert row["masked_lm_ids"][in_slot].tolist() == want["masked_lm_ids"][:2].tolist()
            assert row["next_sentence_labels"][k - 1] == want["next_sentence_labels"]
            assert row["next_sentence_positions"][k - 1] == start
            seen.append(i)
    assert sorted(seen) == list(range(12))
    assert rows[0]["masked_lm_positions"].shape == (2 * P,)
