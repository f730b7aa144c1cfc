"""`python -m bert_tf.tokenize`, run as a user would (subprocess)."""

import json
import os
import subprocess
import sys

import pytest


def _run(args, stdin=b"", env=None):
    env = env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "bert_tf.tokenize", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=300,
    )


@pytest.fixture
def uncased_vocab(shared_file):
    return shared_file("vocab", "bert-base-uncased-vocab.txt")


def test_stdin_uncased_with_quiet_stderr(uncased_vocab):
    """Also the console every command shares: no TensorFlow start-up lines (cuInit, oneDNN)."""
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user's shell has it
    stdin = "Hello, World!\nnaïve café\n\nStraße\r\n".encode()
    result = _run(["--vocab_file", uncased_vocab, "--batch_size", "2"], stdin, env=env)
    assert result.returncode == 0, result.stderr.decode()
    records = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]
    assert records == [
        {
            "text": "Hello, World!",
            "tokens": ["hello", ",", "world", "!"],
            "ids": [7592, 1010, 2088, 999],
        },
        {"text": "naïve café", "tokens": ["naive", "cafe"], "ids": [15743, 7668]},
        {"text": "", "tokens": [], "ids": []},
        {"text": "Straße", "tokens": ["st", "##raße"], "ids": [2358, 27807]},
    ]
    assert result.stderr.decode() == ""


def test_input_file_cased(shared_file, tmp_path):
    vocab = shared_file("vocab", "bert-base-cased-vocab.txt")
    text_file = tmp_path / "in.txt"
    text_file.write_bytes("Hello World\nCafé \xff".encode() + b"\xff")
    result = _run(["--vocab_file", vocab, "--cased", "--input", str(text_file)])
    assert result.returncode == 0, result.stderr.decode()
    records = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]
    assert [r["tokens"] for r in records] == [["Hello", "World"], ["Café", "ÿ"]]
    # An invalid byte is shown as U+FFFD in "text" and dropped from the ids.
    assert records[1]["text"] == "Café ÿ\ufffd"
    assert records[0]["ids"] == [8667, 1291]


def test_missing_files_fail_clearly(uncased_vocab, tmp_path):
    missing_vocab = str(tmp_path / "no_vocab.txt")
    result = _run(["--vocab_file", missing_vocab])
    assert result.returncode != 0
    assert f"vocab file not found: {missing_vocab}" in result.stderr.decode()
    missing_input = str(tmp_path / "no_input.txt")
    result = _run(["--vocab_file", uncased_vocab, "--input", missing_input])
    assert result.returncode != 0
    assert f"input file not found: {missing_input}" in result.stderr.decode()
    assert result.stdout == b""


def test_vocab_without_special_tokens_fails_clearly(tmp_path, capsys):
    # In process (a subprocess costs a TensorFlow import): same main().
    from bert_tf.tokenize import main

    vocab = tmp_path / "bad_vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    assert main(["--vocab_file", str(vocab)]) != 0
    stderr = capsys.readouterr().err
    assert "bad_vocab.txt" in stderr and "[CLS], [SEP], [MASK]" in stderr
