"""The `--strategy` names, kept apart from `strategies` so `--help` imports no TensorFlow."""

STRATEGIES = ("auto", "cpu", "one_device", "mirrored", "multi_worker", "tpu")
