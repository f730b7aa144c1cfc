"""Graph helpers of the export: offsets, spans, packing of words, versions."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import postprocess, versions
from bert_tf.export.char_offsets import byte_to_char_offsets


def test_byte_to_char_offsets_literal():
    # "Zürich ß": Z(1) ü(2) r i c h(1 each) space ß(2) -> char starts at bytes 0,1,3,4,5,6,7,8
    strings = tf.constant(["Zürich ß", "abc", ""])
    offsets = tf.constant([[0, 3, 10], [0, 2, 3], [0, 0, 0]], tf.int64)
    assert byte_to_char_offsets(strings, offsets).numpy().tolist() == [
        [0, 2, 8], [0, 2, 3], [0, 0, 0]]


def test_byte_to_char_offsets_empty():
    result = byte_to_char_offsets(tf.constant([], tf.string), tf.zeros([0, 0], tf.int64))
    assert result.shape == (0, 0)


def test_best_spans_literal():
    start = tf.constant([[9.0, 1.0, 5.0, 0.0, 2.0]])
    end = tf.constant([[9.0, 0.0, 1.0, 4.0, 3.0]])
    allowed = tf.constant([[False, True, True, True, False]])
    # max_answer_length 2: (2,3) = 5 + 4 = 9 is best; (1,3) is too long;
    # positions 0 and 4 are not allowed whatever their logits.
    spans = postprocess.best_spans(start, end, allowed, max_answer_length=2)
    assert spans["start_index"].numpy().tolist() == [2]
    assert spans["end_index"].numpy().tolist() == [3]
    assert spans["score"].numpy().tolist() == [9.0]
    none = postprocess.best_spans(start, end, tf.zeros_like(allowed), 2)
    assert none["start_index"].numpy().tolist() == [-1]
    assert not none["has_span"].numpy()[0]


def test_second_segment_mask_literal():
    # [CLS] q [SEP] c1 c2 [SEP] pad
    segment_ids = tf.constant([[0, 0, 0, 1, 1, 1, 0]])
    padding_mask = tf.constant([[1, 1, 1, 1, 1, 1, 0]])
    mask = postprocess.second_segment_mask(segment_ids, padding_mask)
    assert mask.numpy().astype(int).tolist() == [[0, 0, 0, 1, 1, 0, 0]]


def test_class_outputs_literal():
    out = postprocess.class_outputs(tf.constant([[0.0, np.log(3.0)]]), ["neg", "pos"])
    np.testing.assert_allclose(out["probabilities"].numpy(), [[0.25, 0.75]], rtol=1e-6)
    assert out["label"].numpy().tolist() == [b"pos"]
    assert out["label_id"].numpy().tolist() == [1]


def test_versions_next_and_atomic(tmp_path):
    base = str(tmp_path / "sst2")
    assert versions.next_version(base) == 1
    os.makedirs(os.path.join(base, "3"))
    os.makedirs(os.path.join(base, "notes"))
    assert versions.next_version(base) == 4
    with pytest.raises(RuntimeError, match="crash"):
        with versions.atomic_version_dir(base) as (temporary, final):
            os.makedirs(temporary)
            open(os.path.join(temporary, "half.pb"), "w").close()
            raise RuntimeError("crash")
    # The crash left neither version 4 nor its temporary directory.
    assert sorted(os.listdir(base)) == ["3", "notes"]
    with versions.atomic_version_dir(base) as (temporary, final):
        os.makedirs(temporary)
    assert final == os.path.join(base, "4") and os.path.isdir(final)


def test_versions_existing_is_an_error(tmp_path):
    base = tmp_path / "m"
    (base / "2").mkdir(parents=True)
    (base / "2" / "saved_model.pb").write_text("keep")
    with pytest.raises(FileExistsError, match="already exists"):
        with versions.atomic_version_dir(str(base), 2):
            pass
    assert (base / "2" / "saved_model.pb").read_text() == "keep"
    with pytest.raises(ValueError, match="positive integer"):
        with versions.atomic_version_dir(str(base), 0):
            pass
