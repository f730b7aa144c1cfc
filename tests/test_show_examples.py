import subprocess
import sys


def test_show_examples_decodes_pipeline_output(shared_file):
    corpus = shared_file("corpus", "sample_text.txt")
    vocab = shared_file("vocab", "bert-base-uncased-vocab.txt")
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.show_examples", "--input", corpus, "--vocab_file", vocab,
         "--num_examples", "2", "--max_seq_length", "64"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    blocks = result.stdout.split("--- example ")[1:]
    assert len(blocks) == 2
    for block in blocks:
        tokens_line = next(line for line in block.splitlines() if line.startswith("tokens: "))
        assert tokens_line.startswith("tokens: [CLS] ") and tokens_line.count("[SEP]") == 2
        assert "<" in tokens_line  # masked positions show their original token
        assert "next sentence: " in block


def test_show_examples_missing_input_is_an_error(tmp_path, shared_file):
    vocab = shared_file("vocab", "bert-base-uncased-vocab.txt")
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.show_examples", "--input", str(tmp_path / "none*.txt"),
         "--vocab_file", vocab], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "matches no file" in result.stderr
