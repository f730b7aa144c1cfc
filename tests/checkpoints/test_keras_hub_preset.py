"""KerasHub BERT presets, both ways: KerasHub's own BertBackbone is the reference.

Every preset is built in-process and saved to a tmp directory; nothing is downloaded.
Weights are randomised (biases and LayerNorm included) so that a swapped or
mis-reshaped weight shows in the outputs.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import uuid

import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import bert_tf
from bert_tf import convert, storage
from bert_tf.checkpoints import keras_hub_preset, loading, native, weight_map
from bert_tf.checkpoints.task_record import TaskRecord
from bert_tf.evaluate import load_run
from bert_tf.layers import TextPreprocessor
from bert_tf.models import BertClassifier, BertEncoder, BertTokenClassifier
from bert_tf.optional_imports import MissingDependencyError
from bert_tf.text import tokenizer_contract as contracts
from tests.finetune_helpers import finetune, save_tiny_encoder, tiny_vocab
from tests.helpers import TINY, max_abs_diff, random_inputs

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["a", "sentence", "the", "film", "was", "good", "bad", "very", "not", "it"]
VOCAB = SPECIALS + WORDS + [f"w{i}" for i in range(TINY.vocab_size - len(SPECIALS) - len(WORDS))]
PARITY = 1e-5
# A KerasHub backbone: tanh GELU, the only activation BertBackbone has.
TANH_TINY = TINY.replace(hidden_act="gelu_tanh")


def _randomise(variables, seed):
    rng = np.random.default_rng(seed)
    for variable in variables:
        variable.assign(rng.normal(0.0, 0.2, tuple(variable.shape)).astype("float32"))


def _kerashub_backbone(seed=0):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=TINY.vocab_size, num_layers=TINY.num_layers, num_heads=TINY.num_heads,
        hidden_dim=TINY.hidden_size, intermediate_dim=TINY.intermediate_size,
        max_sequence_length=TINY.max_position_embeddings)
    _randomise(backbone.weights, seed)
    return backbone


def _save_kerashub_preset(backbone, directory):
    backbone.save_to_preset(directory)
    keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True).save_to_preset(directory)
    return directory


@pytest.fixture(scope="module")
def kerashub_preset(tmp_path_factory):
    """(the KerasHub backbone, its preset directory), shared: tests copy before they edit."""
    backbone = _kerashub_backbone()
    return backbone, _save_kerashub_preset(backbone, str(tmp_path_factory.mktemp("preset")))


@pytest.fixture
def preset_copy(kerashub_preset, tmp_path):
    return shutil.copytree(kerashub_preset[1], str(tmp_path / "preset"))


def _random_encoder(seed=1):
    encoder = BertEncoder.from_encoder_config(TANH_TINY)
    _randomise([slot.variable for slot in weight_map.encoder_slots(encoder)], seed)
    return encoder


def _vocab_file(tmp_path):
    path = os.path.join(tmp_path, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    return path


def _differences(ours, theirs, inputs):
    """(max |diff| of the sequence output on unpadded positions, of the pooled output)."""
    mask = inputs["padding_mask"].astype(bool)
    sequence = max_abs_diff(np.asarray(ours["sequence_output"])[mask],
                            np.asarray(theirs["sequence_output"])[mask])
    return sequence, max_abs_diff(ours["pooled_output"], theirs["pooled_output"])


INPUTS = random_inputs(batch=3, length=16, pad_from=[16, 9, 4])


def test_a_kerashub_preset_loads_with_kerashub_outputs(kerashub_preset):
    backbone, preset = kerashub_preset
    assert loading.detect_format(preset) == "kerashub"
    encoder = bert_tf.load_encoder(preset)
    assert encoder.encoder_config == TANH_TINY  # BertBackbone's GELU and epsilon
    sequence, pooled = _differences(encoder(INPUTS, training=False),
                                    backbone(INPUTS, training=False), INPUTS)
    print(f"KerasHub -> bert_tf: sequence {sequence:.3g}, pooled {pooled:.3g}")
    assert sequence <= PARITY and pooled <= PARITY
    info = loading.describe(preset)
    assert info.vocab_file == os.path.join(preset, keras_hub_preset.VOCAB_PATH)
    assert info.tokenizer_contract["vocab_size"] == len(VOCAB)
    assert info.tokenizer_contract["lower_case"] is True  # the tokenizer's `lowercase`


def test_a_pretrainer_from_a_preset_gets_fresh_heads(kerashub_preset):
    result = loading.load(kerashub_preset[1], "pretrainer")
    assert result.format == "kerashub"
    assert result.initialised and all(name.startswith("cls/") for name in result.initialised)


def test_bert_tf_to_kerashub_and_back(tmp_path):
    encoder = _random_encoder()
    preset = str(tmp_path / "preset")
    loading.save(encoder, preset, format="kerashub", vocab_file=_vocab_file(tmp_path),
                 lower_case=True)
    ours = encoder(INPUTS, training=False)
    backbone = keras_hub.models.BertBackbone.from_preset(preset)
    sequence, pooled = _differences(ours, backbone(INPUTS, training=False), INPUTS)
    print(f"bert_tf -> KerasHub: sequence {sequence:.3g}, pooled {pooled:.3g}")
    assert sequence <= PARITY and pooled <= PARITY

    back = bert_tf.load_encoder(preset)
    assert back.encoder_config == encoder.encoder_config
    for a, b in zip(weight_map.encoder_slots(encoder), weight_map.encoder_slots(back),
                    strict=True):
        np.testing.assert_array_equal(a.variable.numpy(), b.variable.numpy(), err_msg=a.name)
    assert max_abs_diff(back(INPUTS)["sequence_output"], ours["sequence_output"]) == 0.0


@pytest.mark.slow  # compiles KerasHub's predict and train steps
def test_the_written_preset_builds_a_text_classifier_on_raw_strings(tmp_path):
    preset = str(tmp_path / "preset")
    loading.save(_random_encoder(), preset, format="kerashub", vocab_file=_vocab_file(tmp_path))
    classifier = keras_hub.models.BertTextClassifier.from_preset(preset, num_classes=2)
    # The preprocessor pads to the encoder's position table, not KerasHub's default 512.
    assert classifier.preprocessor.sequence_length == TINY.max_position_embeddings
    tokens = classifier.preprocessor.tokenizer(["the film was very good"])
    assert [int(t) for t in np.asarray(tokens)[0]] == [VOCAB.index(w) for w in
                                                       "the film was very good".split()]
    sentences = ["a sentence", "the film was good", "the film was bad", "it was not good",
                 "very good", "very bad", "not bad", "a very good film"]
    logits = classifier.predict(sentences[:3], verbose=0)
    assert logits.shape == (3, 2) and np.all(np.isfinite(logits))
    history = classifier.fit(sentences, np.array([1, 1, 0, 0, 1, 0, 1, 1]), batch_size=4,
                             epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])


def test_the_converter_reads_and_writes_presets(kerashub_preset, tmp_path, capsys):
    backbone, preset = kerashub_preset
    native = str(tmp_path / "native")
    assert convert.main(["--from", "kerashub", "--input", preset, "--output", native]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["input_format"], report["output_format"]) == ("kerashub", "bert_tf")
    assert report["tokenizer_contract"]["vocab_size"] == len(VOCAB)
    sequence, pooled = _differences(bert_tf.load_encoder(native)(INPUTS, training=False),
                                    backbone(INPUTS, training=False), INPUTS)
    assert sequence <= PARITY and pooled <= PARITY

    again = str(tmp_path / "again")
    assert convert.main(["--input", native, "--to", "kerashub", "--output", again]) == 0
    assert json.loads(capsys.readouterr().out)["output_format"] == "kerashub"
    written = keras_hub.models.BertBackbone.from_preset(again)
    sequence, pooled = _differences(written(INPUTS, training=False),
                                    backbone(INPUTS, training=False), INPUTS)
    assert sequence <= PARITY and pooled <= PARITY
    # The vocabulary travelled with the native directory into the new preset.
    with open(os.path.join(again, keras_hub_preset.VOCAB_PATH)) as f:
        assert f.read().split("\n")[:len(VOCAB)] == VOCAB


def _edit_config(preset, **changes):
    path = os.path.join(preset, keras_hub_preset.CONFIG_NAME)
    with open(path) as f:
        values = json.load(f)
    for key, value in changes.items():
        if key in values:
            values[key] = value
        else:
            values["config"][key] = value
    with open(path, "w") as f:
        json.dump(values, f)
    return path


def _convert_error(preset, tmp_path, capsys):
    code = convert.main(["--input", preset, "--output", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1, error  # one line, no traceback
    return error


def test_another_backbone_class_is_named(preset_copy, tmp_path, capsys):
    config_path = _edit_config(preset_copy, class_name="GPT2Backbone",
                               registered_name="keras_hub>GPT2Backbone")
    assert loading.detect_format(preset_copy) == "kerashub"  # a KerasHub preset, not BERT
    expected = f"{config_path}: class_name 'GPT2Backbone'; expected 'BertBackbone'"
    with pytest.raises(ValueError, match="^" + expected.replace(".", r"\.")):
        bert_tf.load_encoder(preset_copy)
    assert expected in _convert_error(preset_copy, tmp_path, capsys)


@pytest.mark.parametrize("name, message", [
    (keras_hub_preset.WEIGHTS_NAME, "not found; a KerasHub preset"),
    (keras_hub_preset.VOCAB_PATH, "not found"),
], ids=["weights", "vocabulary"])
def test_a_missing_file_is_named(preset_copy, tmp_path, capsys, name, message):
    missing = os.path.join(preset_copy, name)
    os.remove(missing)
    with pytest.raises(FileNotFoundError, match=f"^{missing} {message}"):
        bert_tf.load_encoder(preset_copy)
    assert f"{missing} not found" in _convert_error(preset_copy, tmp_path, capsys)


def test_a_preset_without_its_config_says_what_a_preset_needs(preset_copy, tmp_path, capsys):
    os.remove(os.path.join(preset_copy, keras_hub_preset.CONFIG_NAME))
    with pytest.raises(ValueError) as raised:
        bert_tf.load_encoder(preset_copy)
    message = str(raised.value)
    assert message.startswith(f"{preset_copy}: not a recognised checkpoint; looked for ")
    assert message.endswith(f"; kerashub (KerasHub's config.json, model.weights.h5 and "
                            f"{keras_hub_preset.VOCAB_PATH})")
    assert _convert_error(preset_copy, tmp_path, capsys) == f"error: {message}\n"


@pytest.mark.parametrize("changes, found", [
    # Keras' own loader would read the first layer and leave the second unread.
    ({"num_layers": 1}, "unexpected arrays of shape"),
    ({"hidden_dim": 48, "num_heads": 4}, "missing arrays of shape"),
])
def test_weights_that_do_not_fit_the_config_are_refused(preset_copy, tmp_path, capsys,
                                                        changes, found):
    config_path = _edit_config(preset_copy, **changes)
    weights = os.path.join(preset_copy, keras_hub_preset.WEIGHTS_NAME)
    with pytest.raises(ValueError, match=f"^{weights}: does not fit the BertBackbone of "
                                         f"{config_path} .*{found}"):
        bert_tf.load_encoder(preset_copy)
    assert "does not fit" in _convert_error(preset_copy, tmp_path, capsys)


def _damage(weights, how):
    """Damages the weights file as an interrupted copy or a stray write would."""
    if how == "truncated":
        with open(weights, "rb") as f:
            data = f.read()
        with open(weights, "wb") as f:
            f.write(data[:len(data) // 2])
    elif how == "garbage":
        with open(weights, "wb") as f:
            f.write(b"not an HDF5 file\n" * 64)
    else:  # readable HDF5 with every array of the right shape, none where Keras looks
        import h5py

        arrays = []
        with h5py.File(weights, "r") as f:
            f.visititems(lambda _, item: arrays.append(item[()])
                         if isinstance(item, h5py.Dataset) else None)
        with h5py.File(weights, "w") as f:
            for index, array in enumerate(arrays):
                f.create_dataset(f"moved/{index}", data=array)


@pytest.mark.parametrize("how, reason", [
    ("truncated", "truncated file"),  # h5py, opening it
    ("garbage", "file signature not found"),  # h5py, opening it
    ("renamed", "objects could not be loaded"),  # Keras' load_weights, after many warnings
], ids=["truncated", "garbage", "renamed"])
def test_a_damaged_weights_file_is_named_in_one_line(preset_copy, tmp_path, capsys, recwarn,
                                                     how, reason):
    weights = os.path.join(preset_copy, keras_hub_preset.WEIGHTS_NAME)
    config_path = os.path.join(preset_copy, keras_hub_preset.CONFIG_NAME)
    _damage(weights, how)
    expected = (f"{weights}: not a readable Keras weights file (", reason,
                f"); expected the HDF5 weights of the BertBackbone of {config_path}, "
                "as save_to_preset writes them")
    pattern = "^" + ".*".join(re.escape(part) for part in expected) + "$"
    with pytest.raises(ValueError, match=pattern):
        bert_tf.load_encoder(preset_copy)
    code = convert.main(["--from", "kerashub", "--input", preset_copy,
                         "--output", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and re.match(pattern, lines[0][len("error: "):]), captured.err
    assert not os.path.exists(tmp_path / "out")
    # Nor do Keras' warnings about the parts it skipped reach the user.
    skipped = [str(w.message) for w in recwarn if issubclass(w.category, UserWarning)
               and f"{os.sep}keras{os.sep}" in w.filename]
    assert not skipped, skipped


def test_a_vocabulary_of_another_size_is_refused(preset_copy):
    _edit_config(preset_copy, vocabulary_size=TINY.vocab_size + 20)
    with pytest.raises(ValueError, match=rf"vocabulary\.txt: {len(VOCAB)} tokens; expected "
                                         rf"vocabulary_size {TINY.vocab_size + 20}"):
        bert_tf.load_encoder(preset_copy)


def test_an_exact_gelu_encoder_is_not_written(tmp_path, capsys):
    # BertBackbone has the tanh GELU only: writing an exact-GELU encoder would change it.
    native = str(tmp_path / "native")
    loading.save(BertEncoder.from_encoder_config(TINY), native, vocab_file=_vocab_file(tmp_path))
    out = str(tmp_path / "preset")
    assert convert.main(["--input", native, "--to", "kerashub", "--output", out]) == 2
    error = capsys.readouterr().err
    assert error == ("error: KerasHub's BertBackbone uses the tanh GELU; this encoder's "
                     "hidden_act is 'gelu', so its outputs would differ\n")
    assert not os.path.exists(out)


def test_without_keras_hub_the_extra_is_named(kerashub_preset, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # what an absent package looks like
    with pytest.raises(MissingDependencyError,
                       match=r"needs the keras-hub package, which is not installed: "
                             r"pip install 'bert_tf\[kerashub\]'$"):
        bert_tf.load_encoder(kerashub_preset[1])
    native = str(tmp_path / "native")
    loading.save(_random_encoder(), native, vocab_file=_vocab_file(tmp_path))
    assert convert.main(["--input", native, "--to", "kerashub",
                         "--output", str(tmp_path / "preset")]) == 1
    assert capsys.readouterr().err == ("error: the KerasHub export needs the keras-hub package, "
                                       "which is not installed: pip install 'bert_tf[kerashub]'\n")


def test_a_preset_is_written_with_its_vocabulary(tmp_path, capsys):
    # Every preset written reads back: the reader refuses a preset without a vocabulary.
    native, out = str(tmp_path / "native"), str(tmp_path / "preset")
    loading.save(_random_encoder(), native)
    assert convert.main(["--input", native, "--to", "kerashub", "--output", out]) == 2
    assert capsys.readouterr().err == (f"error: {out}: a KerasHub preset ships its tokenizer; "
                                       "give the vocabulary (vocab_file, or --vocab_file)\n")
    assert not os.path.exists(out)
    vocab = _vocab_file(tmp_path)
    assert convert.main(["--input", native, "--to", "kerashub", "--output", out,
                         "--vocab_file", vocab]) == 0
    assert loading.describe(out).tokenizer_contract["vocab_size"] == len(VOCAB)


def test_a_preset_goes_to_object_storage_and_back_through_a_removed_local_copy(
        tmp_path, monkeypatch):
    staging = tmp_path / "tmp"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    encoder, preset = _random_encoder(), f"ram://kerashub-{uuid.uuid4().hex[:8]}/preset"
    local = str(tmp_path / "local")
    for directory in (preset, local):
        keras_hub_preset.write_preset(encoder, directory, _vocab_file(tmp_path), True)
    assert storage.copy_tree(preset, str(tmp_path / "copied")) == sorted(
        os.path.relpath(os.path.join(folder, name), local).replace(os.sep, "/")
        for folder, _, names in os.walk(local) for name in names)
    slots = weight_map.encoder_slots(encoder)
    arrays = keras_hub_preset.read_arrays(preset, slots)
    assert sorted(arrays) == sorted(slot.name for slot in slots)
    for slot in slots:
        np.testing.assert_array_equal(arrays[slot.name], slot.variable.numpy(), err_msg=slot.name)
    assert not os.listdir(staging)  # the local copies were removed


def _fine_tuned_classifier_dir(tmp_path, num_classes=3, max_seq_length=24):
    """A bert_tf directory of a fine-tuned classifier (random encoder and head), as
    a fine-tuning run leaves it: class, head, task record, vocabulary and contract."""
    classifier = BertClassifier(_random_encoder(), num_classes=num_classes, dropout=0.2)
    _randomise(classifier.head.weights, seed=7)
    vocab = _vocab_file(tmp_path)
    record = TaskRecord(kind="classifier" if num_classes > 1 else "regressor", name="glue",
                        max_seq_length=max_seq_length, text_inputs=1,
                        label_names=[f"label_{i}" for i in range(num_classes)]
                        if num_classes > 1 else None)
    directory = str(tmp_path / "fine_tuned")
    native.save(classifier, directory, contracts.contract_from_vocab(vocab, True), vocab, record)
    return classifier, directory


@pytest.mark.slow  # compiles KerasHub's predict step
def test_a_fine_tuned_classifier_goes_out_with_its_head(tmp_path, capsys):
    classifier, directory = _fine_tuned_classifier_dir(tmp_path)
    preset = str(tmp_path / "preset")
    assert convert.main(["--input", directory, "--model", "task", "--to", "kerashub",
                         "--output", preset]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "BertClassifier" and report["task"]["kind"] == "classifier"

    # KerasHub's task, with the head and the fine-tuned length, from the preset alone.
    task = keras_hub.models.BertTextClassifier.from_preset(preset)
    assert (task.num_classes, task.dropout) == (3, 0.2)
    assert task.preprocessor.sequence_length == 24
    sentences = ["the film was very good", "it was not good", "a bad film", "very very bad"]
    theirs = task.predict(sentences, verbose=0)
    preprocessor = TextPreprocessor(_vocab_file(tmp_path), lower_case=True, max_seq_length=24)
    ours = classifier(preprocessor(tf.constant(sentences)), training=False)["logits"]
    difference = max_abs_diff(ours, theirs)
    print(f"bert_tf classifier -> KerasHub BertTextClassifier: logits {difference:.3g}")
    assert difference <= PARITY
    # The spread of the logits is far above the tolerance: a lost head would show.
    assert np.ptp(theirs) > 100 * PARITY
    # The preset's backbone is the classifier's encoder.
    back = bert_tf.load_encoder(preset)
    for a, b in zip(weight_map.encoder_slots(classifier.encoder), weight_map.encoder_slots(back),
                    strict=True):
        np.testing.assert_array_equal(a.variable.numpy(), b.variable.numpy(), err_msg=a.name)


# The trainer traces its train loop and evaluation: about 10 of the test's 12 CPU seconds.
# Its parts run in the fast suite: a bert_tf directory with a task record goes out with
# its head (test_a_fine_tuned_classifier_goes_out_with_its_head), runs write that directory
# (tests/tasks/test_finetuning.py).
@pytest.mark.long
def test_a_fine_tuning_run_goes_out_as_a_text_classifier(tmp_path, shared_file, capsys):
    """docs/checkpoints.md's `convert --input runs/sst2/ --model task --to kerashub`, on a
    run of the real trainer: KerasHub's classifier on raw text gives the run's logits."""
    shared_file("glue", "SST-2", "train.tsv")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tiny_vocab()) + "\n")
    # The tanh GELU: KerasHub's BertBackbone has no other.
    init = save_tiny_encoder(tmp_path / "init", vocab, hidden_act="gelu_tanh")
    run = str(tmp_path / "runs" / "sst2")
    assert finetune("glue_sst2", run, init, **{
        "data.max_train_examples": 16, "data.max_eval_examples": 8, "data.max_seq_length": 32,
        "trainer.train_epochs": 0, "trainer.train_steps": 2, "trainer.global_batch_size": 8,
        "trainer.steps_per_loop": 2}) == 0
    capsys.readouterr()  # the trainer's lines
    preset = str(tmp_path / "sst2_preset")
    assert convert.main(["--input", run, "--model", "task", "--to", "kerashub",
                         "--output", preset]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["input_format"], report["model"]) == ("bert_tf", "BertClassifier")
    assert report["task"]["label_names"] == ["0", "1"]

    task = keras_hub.models.BertTextClassifier.from_preset(preset)
    assert task.num_classes == 2 and task.preprocessor.sequence_length == 32
    sentences = tf.constant(["The film was a delight.", "dull, and far too long",
                             "it's not good", "a gripping, funny film"])
    theirs_inputs = task.preprocessor(sentences)
    theirs = task(theirs_inputs, training=False)  # eager: no predict step to compile
    # The run as evaluation restores it, on bert_tf's tokenization of the same text.
    _, model, _ = load_run(run)
    ours_inputs = bert_tf.load_preprocessor(run, max_seq_length=32)(sentences)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert np.asarray(theirs_inputs[key]).astype("int32").tolist() == np.asarray(
            ours_inputs[key]).tolist(), key
    ours = model(ours_inputs, training=False)["logits"]
    difference = max_abs_diff(ours, theirs)
    print(f"fine-tuning run -> KerasHub BertTextClassifier: logits {difference:.3g}")
    assert difference <= PARITY
    assert np.ptp(np.asarray(theirs)) > 100 * PARITY  # a lost head would show
    # The run trained the encoder it started from: the preset holds the trained one.
    start, end = bert_tf.load_encoder(init), bert_tf.load_encoder(preset)
    assert max(max_abs_diff(a, b) for a, b in zip(start.get_weights(), end.get_weights())) > 0


def test_a_fine_tuned_regressor_keeps_its_one_score(tmp_path, capsys):
    classifier, directory = _fine_tuned_classifier_dir(tmp_path, num_classes=1)
    preset = str(tmp_path / "preset")
    assert convert.main(["--input", directory, "--model", "task", "--to", "kerashub",
                         "--output", preset]) == 0
    task = keras_hub.models.BertTextClassifier.from_preset(preset)
    inputs = {key: value[:, :16] for key, value in INPUTS.items()}
    theirs = task(inputs, training=False)
    assert theirs.shape == (3, 1)
    assert max_abs_diff(classifier(inputs, training=False)["logits"], theirs) <= PARITY


def test_the_default_converts_the_encoder_of_a_fine_tuned_model(tmp_path, capsys):
    _, directory = _fine_tuned_classifier_dir(tmp_path)
    preset = str(tmp_path / "preset")
    assert convert.main(["--input", directory, "--to", "kerashub", "--output", preset]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "BertEncoder"
    assert not os.path.exists(os.path.join(preset, "task.json"))


@pytest.mark.parametrize("source, target, message", [
    # A head KerasHub has no task for.
    ("token_classifier", "kerashub",
     "error: format 'kerashub' cannot hold the head of a BertTokenClassifier; "
     "write its encoder (--model encoder)\n"),
    # A format of encoders and pretrainers only.
    ("classifier", "hf",
     "error: format 'hf' cannot hold the head of a BertClassifier; "
     "write its encoder (--model encoder)\n"),
    # A source without a fine-tuned head.
    ("preset", "bert_tf",
     "error: {input}: a kerashub checkpoint holds no fine-tuned head; --model task reads "
     "bert_tf directories, training runs and .keras files\n"),
])
def test_a_head_that_cannot_travel_is_refused_in_one_line(tmp_path, capsys, kerashub_preset,
                                                          source, target, message):
    if source == "token_classifier":
        model = BertTokenClassifier(_random_encoder(), num_labels=4)
        source = str(tmp_path / "tagger")
        native.save(model, source, None, _vocab_file(tmp_path),
                    TaskRecord(kind="token_classifier", name="ner", max_seq_length=16,
                               label_names=["O", "B", "I", "X"]))
    elif source == "classifier":
        source = _fine_tuned_classifier_dir(tmp_path)[1]
    else:
        source = kerashub_preset[1]
    out = str(tmp_path / "out")
    code = convert.main(["--input", source, "--model", "task", "--to", target, "--output", out])
    assert (code, capsys.readouterr().err) == (2, message.format(input=source))
    assert not os.path.exists(out)


def test_a_classifier_saved_by_keras_goes_out_with_its_head(tmp_path, capsys):
    classifier, _ = _fine_tuned_classifier_dir(tmp_path, num_classes=2)
    keras_file = str(tmp_path / "classifier.keras")
    classifier.save(keras_file)
    preset = str(tmp_path / "preset")
    assert convert.main(["--input", keras_file, "--model", "task", "--to", "kerashub",
                         "--vocab_file", _vocab_file(tmp_path), "--output", preset]) == 0
    task = keras_hub.models.BertTextClassifier.from_preset(preset)
    # Without a task record the preprocessor pads to the position table.
    assert task.preprocessor.sequence_length == TINY.max_position_embeddings
    inputs = {key: value[:, :16] for key, value in INPUTS.items()}
    assert max_abs_diff(classifier(inputs, training=False)["logits"],
                        task(inputs, training=False)) <= PARITY
