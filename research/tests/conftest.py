"""The library tests' fixtures (real data from ../shared, the MiniLM checkpoint), shared here."""

from tests.conftest import bert_corpus, minilm_dir, reference_file, shared_file  # noqa: F401
