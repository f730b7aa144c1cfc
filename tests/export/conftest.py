"""Session-wide tiny exports of every task kind, shared by the export tests.

Models: the real uncased vocab (30,522 tokens), hidden 32, 2 layers, random
weights. Each export takes a few seconds, so each kind is exported once.
"""

import os

import pytest

from bert_tf import shared_data
from tests.export.export_helpers import TASKS, build_model

REQUIRE_DATA = os.environ.get("BERT_TF_REQUIRE_DATA") == "1"


def _vocab_path():
    path = shared_data.data_path("vocab", "bert-base-uncased-vocab.txt")
    if not os.path.exists(path):
        message = f"shared data file not found at {path}"
        if REQUIRE_DATA:
            pytest.fail(f"{message} (BERT_TF_REQUIRE_DATA=1 makes missing data an error)")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def vocab_file():
    """The real uncased BERT vocab from ../shared/data."""
    return _vocab_path()


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    """The project's tokenizer over the real uncased vocab."""
    from bert_tf.text.tokenizer import BertTokenizer

    return BertTokenizer(vocab_file, lower_case=True)


@pytest.fixture(scope="session")
def exports(tokenizer, tmp_path_factory):
    """{kind: (model, task_info, export path)} for every kind in `TASKS`."""
    from bert_tf.export import export_model

    base = tmp_path_factory.mktemp("exports")
    result = {}
    for seed, (kind, info) in enumerate(TASKS.items()):
        model = build_model(kind, info, seed)
        result[kind] = (model, info, export_model(model, tokenizer, str(base / kind), info))
    return result
