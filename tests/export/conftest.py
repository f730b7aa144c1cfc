"""Session-wide tiny exports of every task kind, shared by the export tests.

Models: the real uncased vocab (30,522 tokens), hidden 32, 2 layers, random
weights. Each export takes a few seconds, so each kind is exported once.
"""

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


@pytest.fixture(scope="session")
def exports(tokenizer, tmp_path_factory):
    """{kind: (model, task record, export path)} for every kind in `TASKS`."""
    from bert_tf.export import export_model

    base = tmp_path_factory.mktemp("exports")
    result = {}
    for seed, (kind, record) in enumerate(TASKS.items()):
        model = build_model(kind, record, seed)
        result[kind] = (model, record, export_model(model, tokenizer, str(base / kind), record))
    return result
