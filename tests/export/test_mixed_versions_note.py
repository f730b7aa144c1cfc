"""An int8 export written beside a float one becomes the version TF Serving serves: the
export command says so."""

import json

from bert_tf.export.__main__ import mixed_versions_note, version_kinds


def _version(base, number, quantization, onnx=False):
    directory = base / str(number)
    if onnx:
        directory.mkdir(parents=True)
        (directory / "bert_tf_onnx.json").write_text(json.dumps({"quantization": quantization}))
    else:
        (directory / "assets.extra").mkdir(parents=True)
        (directory / "assets.extra" / "bert_tf_export.json").write_text(
            json.dumps({"quantization": quantization}))


def test_version_kinds_reads_each_versions_metadata(tmp_path):
    _version(tmp_path, 1, None)
    _version(tmp_path, 2, "int8")
    _version(tmp_path, 3, "int8", onnx=True)
    (tmp_path / "4").mkdir()  # no metadata: not a bert_tf export
    (tmp_path / ".tmp-5-abc").mkdir()  # an export being written
    assert version_kinds(str(tmp_path)) == {1: "float32 SavedModel", 2: "int8 SavedModel",
                                            3: "int8 ONNX"}
    assert version_kinds(str(tmp_path / "missing")) == {}


def test_an_int8_version_beside_a_float_one_is_announced(tmp_path):
    base = str(tmp_path / "sst2")
    before = {1: "float32 SavedModel"}
    after = {1: "float32 SavedModel", 2: "int8 SavedModel"}
    note = mixed_versions_note(base, before, after)
    assert note == (f"{base} now holds versions 1 (float32 SavedModel), 2 (int8 SavedModel); "
                    "TF Serving serves the highest, 2 (int8 SavedModel). To serve them side by "
                    f"side, export each kind to its own --export_dir (e.g. {base}_int8).")
    onnx = mixed_versions_note(base, after, {**after, 3: "float32 ONNX"})
    assert onnx.endswith(f"(e.g. {base}_onnx_float32).")


def test_no_note_when_every_version_is_of_one_kind(tmp_path):
    base = str(tmp_path)
    assert mixed_versions_note(base, {}, {1: "int8 SavedModel"}) is None
    assert mixed_versions_note(base, {1: "float32 SavedModel"},
                               {1: "float32 SavedModel", 2: "float32 SavedModel"}) is None
    # Nothing new was written: nothing to announce.
    assert mixed_versions_note(base, {1: "a", 2: "b"}, {1: "a", 2: "b"}) is None
