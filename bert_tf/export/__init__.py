"""SavedModels with raw-text signatures for TF Serving, Keras and Python.

    python -m bert_tf.export --model_dir runs/sst2 --export_dir exports/sst2

`export_model_dir` / `export_model` write `EXPORTS/NAME/<version>/`;
`load_export` loads one for prediction. See `serving_module` for the
signatures, `kinds` for what each task kind serves and `op_allowlist` for
the TF Serving op contract.
"""

__all__ = ["export_model", "export_model_dir", "load_export", "LoadedExport"]

_HOMES = {"export_model": "exporter", "export_model_dir": "exporter",
          "load_export": "loaded_export", "LoadedExport": "loaded_export"}


def __getattr__(name):
    # Lazy: `python -m bert_tf.export.saved_model_cli` must not pull in Keras
    # and the models just because this package is imported first.
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"bert_tf.export.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'bert_tf.export' has no attribute {name!r}")
