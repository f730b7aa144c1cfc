"""Session-wide tiny exports of every task kind, shared by the export tests.

Models: the real uncased vocab (30,522 tokens), hidden 32, 2 layers, random
weights. Each export takes a few seconds, so each kind is exported once.
"""

from collections.abc import Mapping

import pytest

from research import shared_data
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


class Exports(Mapping):
    """`{kind: (model, task record, export path)}` of every kind in `TASKS`, each built when
    first asked for, so a test process that serves three kinds pays for three exports (and
    keeps three models), not six.

    Args:
      tokenizer: the tokenizer every export embeds.
      base: the directory the exports are written under.
      quantization: None (float) or "int8", as `export_model` takes it.
    """

    def __init__(self, tokenizer, base, quantization=None):
        self._tokenizer = tokenizer
        self._base = base
        self._quantization = quantization
        self._built = {}

    def __getitem__(self, kind):
        from bert_tf.export import export_model

        if kind not in self._built:
            record = TASKS[kind]
            # Each kind keeps its own seed whatever order the kinds are built in.
            model = build_model(kind, record, seed=list(TASKS).index(kind))
            self._built[kind] = (model, record, export_model(
                model, self._tokenizer, str(self._base / kind), record,
                quantization=self._quantization))
        return self._built[kind]

    def __iter__(self):
        return iter(TASKS)

    def __len__(self):
        return len(TASKS)


@pytest.fixture(scope="session")
def exports(tokenizer, tmp_path_factory):
    """The session's tiny exports (`Exports`), built on first use."""
    return Exports(tokenizer, tmp_path_factory.mktemp("exports"))


@pytest.fixture(scope="session")
def int8_exports(tokenizer, tmp_path_factory):
    """The same models as `exports`, exported with `quantization="int8"`, built on first use."""
    return Exports(tokenizer, tmp_path_factory.mktemp("int8_exports"), quantization="int8")
