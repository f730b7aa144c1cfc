"""Session-wide tiny exports of every task kind, shared by the export tests.

Models: the real uncased vocab (30,522 tokens), hidden 32, 2 layers, random
weights. An export takes 10-20 s, so each kind is exported once per test run:
the test processes (pytest-xdist workers) share one folder of exports, and a
process that finds a kind exported rebuilds only its model (seeded, so the same
weights, which it checks).
"""

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from tests import shared_data
from tests.export.export_helpers import TASKS, build_model
from tests.helpers import require


@pytest.fixture(scope="session")
def vocab_file():
    """The real uncased BERT vocab from ../shared/data."""
    return require(shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"),
                   "shared data file")


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    """The project's tokenizer over the real uncased vocab."""
    from bert_tf.text.tokenizer import BertTokenizer

    return BertTokenizer(vocab_file, lower_case=True)


def weights_fingerprint(model):
    """A digest of `model`'s weights: the same digest, the same model."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path):
    """Holds an exclusive lock on `path` (created if missing) across processes."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Exports(Mapping):
    """`{kind: (model, task record, export path)}` of every kind in `TASKS`, each built when
    first asked for, so a test process that serves three kinds pays for three models, not
    six; a kind another process has exported under `base` is not exported again.

    Args:
      tokenizer: the tokenizer every export embeds.
      base: the directory the exports are written under (shared by the test processes).
      quantization: None (float) or "int8", as `export_model` takes it.
    """

    def __init__(self, tokenizer, base, quantization=None):
        self._tokenizer = tokenizer
        self._base = base
        self._quantization = quantization
        self._built = {}

    def __getitem__(self, kind):
        if kind not in self._built:
            record = TASKS[kind]
            # Each kind keeps its own seed whatever order the kinds are built in.
            model = build_model(kind, record, seed=list(TASKS).index(kind))
            self._built[kind] = (model, record, self._export(kind, model, record))
        return self._built[kind]

    def _export(self, kind, model, record):
        from bert_tf.export import export_model

        done_file = self._base / f"{kind}.done.json"
        fingerprint = weights_fingerprint(model)
        with _locked(self._base / f"{kind}.lock"):
            if done_file.exists():
                done = json.loads(done_file.read_text())
                # Another process's export is of this model only if the seeded weights agree.
                assert done["weights"] == fingerprint, (
                    f"the {kind} model built here differs from the one exported at "
                    f"{done['path']}: its seeded initialisation is not deterministic")
                return done["path"]
            path = export_model(model, self._tokenizer, str(self._base / kind), record,
                                quantization=self._quantization)
            done_file.write_text(json.dumps({"path": path, "weights": fingerprint}))
            return path

    def __iter__(self):
        return iter(TASKS)

    def __len__(self):
        return len(TASKS)


# A folder the exports of several test runs share (CI sets it for its two commands).
CACHE_ENV = "BERT_TF_TEST_CACHE"
PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bert_tf")


def _code_fingerprint():
    """A digest of the package's Python sources: other code, other cached exports."""
    digest = hashlib.sha256()
    for root, folders, files in os.walk(PACKAGE):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                digest.update(os.path.relpath(path, PACKAGE).encode())
                with open(path, "rb") as f:
                    digest.update(f.read())
    return digest.hexdigest()[:16]


def shared_folder(tmp_path_factory, name):
    """A folder every test process of this run sees: beside the workers' own temporary
    folders under pytest-xdist, in the session's otherwise; with `BERT_TF_TEST_CACHE` set,
    under it, keyed by the package's code, so later runs of the same code reuse it."""
    cache = os.environ.get(CACHE_ENV)
    if cache:
        folder = Path(cache) / f"{name}-{_code_fingerprint()}"
    elif "PYTEST_XDIST_WORKER" in os.environ:
        folder = tmp_path_factory.getbasetemp().parent / name
    else:
        return tmp_path_factory.mktemp(name)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def exports(tokenizer, tmp_path_factory):
    """The session's tiny exports (`Exports`), built on first use."""
    return Exports(tokenizer, shared_folder(tmp_path_factory, "exports"))


@pytest.fixture(scope="session")
def int8_exports(tokenizer, tmp_path_factory):
    """The same models as `exports`, exported with `quantization="int8"`, built on first use."""
    return Exports(tokenizer, shared_folder(tmp_path_factory, "int8_exports"),
                   quantization="int8")
