"""Benchmark implementations behind `python -m bert_tf.bench`."""
