"""Smoke test of `python -m research.bench serve` (a few calls, tiny model)."""

import pytest

from research.benchmarks import serve

# A benchmark's own run: the second test command (-m long).
pytestmark = pytest.mark.long


def test_bench_serve_smoke(shared_file, capsys):
    args = ["--preset", "bert_tiny", "--max_seq_length", "16", "--batch_sizes", "1,2",
            "--iterations", "2", "--warmup", "1",
            "--data", shared_file("glue", "SST-2", "dev.tsv"),
            "--vocab_file", shared_file("vocab", "bert-base-uncased-vocab.txt")]
    assert serve.main(args) == 0
    table = capsys.readouterr().out.splitlines()
    rows = [line.split("|")[1:-1] for line in table if line.startswith("| 1 ") or
            line.startswith("| 2 ")]
    assert [(r[0].strip(), r[1].strip()) for r in rows] == [
        ("1", "bert_tf"), ("1", "garden"), ("2", "bert_tf"), ("2", "garden")]
    assert all(float(r[2]) > 0 for r in rows)
    assert float(rows[0][5]) > 0  # the ratio column of bert_tf's row


def test_summarize_literal():
    summary = serve.summarize([0.1, 0.2, 0.3, 0.4], batch_size=2)
    assert summary["texts_per_s"] == pytest.approx(8 / 1.0)
    assert summary["p50_ms"] == pytest.approx(250.0)
    assert summary["p95_ms"] == pytest.approx(385.0)
