"""The library tests' fixtures (real data from ../shared, the MiniLM checkpoint), shared here."""

from tests.conftest import (  # noqa: F401
    bert_corpus,
    minilm_dir,
    reference_file,
    release_module_state,
    shared_file,
)
