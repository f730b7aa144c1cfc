"""Fine-tuning from a checkpoint whose reader is not installed: one line, no traceback."""

import os
import sys

import pytest

from bert_tf.checkpoints import loading
from bert_tf.models.bert_encoder import BertEncoder
from tests.finetune_helpers import finetune

pytestmark = pytest.mark.slow


def test_finetuning_from_a_pytorch_pickle_without_torch_is_one_line(tmp_path, shared_file,
                                                                   monkeypatch, capsys):
    shared_file("glue", "MRPC", "train.tsv")
    vocab = shared_file("vocab", "bert-base-uncased-vocab.txt")
    encoder = BertEncoder(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=2,
                          intermediate_size=64, max_position_embeddings=64)
    checkpoint = tmp_path / "hf"
    loading.save(encoder, str(checkpoint), "hf", vocab_file=vocab, lower_case=True)
    # The same checkpoint as PyTorch publishes it: only torch reads it safely.
    os.remove(checkpoint / "model.safetensors")
    (checkpoint / "pytorch_model.bin").write_bytes(b"\x80\x04not read without torch")
    monkeypatch.setitem(sys.modules, "torch", None)
    capsys.readouterr()
    code = finetune("glue_mrpc", tmp_path / "run", str(checkpoint), **{
        "trainer.train_steps": 1, "data.max_seq_length": 32})
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines() == [
        f"error: reading the PyTorch pickle {checkpoint / 'pytorch_model.bin'} safely "
        "(torch.load(weights_only=True); or convert it to model.safetensors) needs the torch "
        "package, which is not installed: pip install torch"]
