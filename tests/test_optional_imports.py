"""Dependencies: Hugging Face checkpoints need nothing extra; a missing optional package is
reported in one line with its pip command."""

import configparser
import os
import sys

import pytest

from bert_tf.optional_imports import MissingDependencyError, import_optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_cfg():
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    return setup


def test_safetensors_is_a_core_dependency():
    # Fine-tuning from the README's Hugging Face checkpoint must work on a plain install.
    requirements = _setup_cfg()["options"]["install_requires"].split()
    assert any(line.startswith("safetensors") for line in requirements), requirements


def test_there_is_no_hf_extra_any_more():
    assert "hf" not in _setup_cfg()["options.extras_require"]  # folded into the core install


def test_a_missing_package_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what an absent package looks like
    with pytest.raises(MissingDependencyError) as raised:
        import_optional("torch", "torch", "reading the PyTorch pickle x.bin")
    assert str(raised.value) == ("reading the PyTorch pickle x.bin needs the torch package, "
                                 "which is not installed: pip install torch")
    # A pinned version is quoted for the shell.
    monkeypatch.setitem(sys.modules, "official_stand_in", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'tf-models-official==2.20.0'$"):
        import_optional("official_stand_in", "tf-models-official", "Model Garden interop",
                        "tf-models-official==2.20.0")


@pytest.mark.parametrize("absent", ["tf2onnx", "onnx"])
def test_the_onnx_export_hint_is_a_command_that_pastes(monkeypatch, absent):
    import shlex

    from bert_tf.export.onnx_export import export_onnx

    monkeypatch.setitem(sys.modules, absent, None)
    with pytest.raises(MissingDependencyError) as raised:
        export_onnx(model=None, tokenizer=None, export_base="unused", record=None)
    command = str(raised.value).split(": ", 1)[1]
    assert command == "pip install 'bert_tf[onnx]'"
    # What a shell hands pip: the extra, without stray quotes.
    assert shlex.split(command) == ["pip", "install", "bert_tf[onnx]"]
