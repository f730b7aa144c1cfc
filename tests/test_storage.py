"""`bert_tf.storage`: one file API for local paths and object storage (`ram://` here)."""

import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from bert_tf import storage

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def ram_root():
    return f"ram://storage-{uuid.uuid4().hex[:8]}"


def test_local_paths_do_not_import_tensorflow(tmp_path):
    script = (
        "import sys\n"
        "from bert_tf import storage\n"
        f"root = {str(tmp_path)!r}\n"
        "storage.makedirs(storage.join(root, 'a'), exist_ok=True)\n"
        "with storage.atomic_write(storage.join(root, 'a', 'f.txt')) as f:\n"
        "    f.write('x')\n"
        "assert storage.isfile(storage.join(root, 'a', 'f.txt'))\n"
        "assert storage.glob(storage.join(root, '*')) and storage.listdir(root) == ['a']\n"
        "assert storage.check_paths(root) is None\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                            text=True, env=dict(os.environ, PYTHONPATH=REPO), timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path,expected", [
    ("gs://bucket/run", True), ("ram://x", True), ("s3://b/k", True), ("file:///tmp/x", True),
    ("runs/base", False), ("/abs/path", False), ("C:/not/a/scheme", False), ("ram:/x", False)])
def test_has_scheme(path, expected):
    assert storage.has_scheme(path) is expected


def test_files_on_object_storage_read_write_list_and_move(ram_root):
    folder = storage.join(ram_root, "run")
    storage.makedirs(folder, exist_ok=True)
    path = storage.join(folder, "notes.txt")
    with storage.atomic_write(path, encoding="utf-8") as f:
        f.write("first, and longer\nline two\n")
    # Rewritten shorter: nothing of the old content stays (ram:// appends unless cleared).
    with storage.atomic_write(path, encoding="utf-8") as f:
        f.write("héllo\n")
    assert storage.read_text(path) == "héllo\n"
    assert storage.getsize(path) == len("héllo\n".encode())
    with storage.open(path, "a", encoding="utf-8") as f:
        f.write("more\n")
    with storage.open(path, encoding="utf-8") as f:
        assert list(f) == ["héllo\n", "more\n"]
    with storage.open(storage.join(folder, "blob.bin"), "wb") as f:
        f.write(bytes(range(256)) * 100)
    assert storage.read_bytes(storage.join(folder, "blob.bin")) == bytes(range(256)) * 100

    assert sorted(storage.listdir(folder)) == ["blob.bin", "notes.txt"]
    assert storage.glob(storage.join(folder, "*.txt")) == [path]
    assert storage.isdir(folder) and not storage.isdir(path)
    assert storage.isfile(path) and not storage.isfile(folder)
    # A string prefix of a name is neither a file nor a directory.
    assert not storage.exists(storage.join(folder, "notes"))
    assert not storage.isdir(storage.join(folder, "notes"))

    storage.copy(path, storage.join(folder, "copy.txt"))
    storage.rename(storage.join(folder, "copy.txt"), storage.join(folder, "moved.txt"))
    assert storage.read_text(storage.join(folder, "moved.txt")) == "héllo\nmore\n"
    assert not storage.exists(storage.join(folder, "copy.txt"))
    storage.remove(storage.join(folder, "moved.txt"))
    storage.rmtree(folder)
    assert not storage.exists(path)
    storage.rmtree(folder, ignore_errors=True)  # already gone


def test_missing_remote_files_raise_file_not_found(ram_root):
    with pytest.raises(FileNotFoundError, match="nothing.txt"):
        storage.open(storage.join(ram_root, "nothing.txt"))
    with pytest.raises(FileNotFoundError, match=ram_root):
        storage.listdir(storage.join(ram_root, "no_dir"))


def test_a_listing_holds_only_the_entries_under_the_directory(ram_root):
    for name in ("eval_results.json", "eval/events.1", "evaluation/events.2"):
        storage.makedirs(os.path.dirname(storage.join(ram_root, name)), exist_ok=True)
        with storage.open(storage.join(ram_root, name), "w") as f:
            f.write("x")
    assert sorted(storage.listdir(storage.join(ram_root, "eval"))) == ["events.1"]
    assert sorted(storage.listdir(ram_root)) == ["eval", "eval_results.json", "evaluation"]


def test_a_tree_goes_to_object_storage_and_back_whole(tmp_path, ram_root):
    (tmp_path / "source" / "assets" / "tokenizer").mkdir(parents=True)
    (tmp_path / "source" / "config.json").write_text("{}")
    (tmp_path / "source" / "assets" / "tokenizer" / "vocabulary.txt").write_text("[PAD]\n")
    assert storage.copy_tree(str(tmp_path / "source"), ram_root) == [
        "assets/tokenizer/vocabulary.txt", "config.json"]
    assert storage.read_text(storage.join(ram_root, "assets", "tokenizer",
                                          "vocabulary.txt")) == "[PAD]\n"
    back = tmp_path / "back"
    assert storage.copy_tree(ram_root, str(back)) == ["assets/tokenizer/vocabulary.txt",
                                                      "config.json"]
    assert (back / "assets" / "tokenizer" / "vocabulary.txt").read_text() == "[PAD]\n"
    assert (back / "config.json").read_text() == "{}"


def test_a_failed_local_atomic_write_keeps_the_old_file(tmp_path):
    path = str(tmp_path / "results.json")
    with storage.atomic_write(path) as f:
        f.write("old")
    with pytest.raises(RuntimeError), storage.atomic_write(path) as f:
        f.write("half")
        raise RuntimeError("interrupted")
    assert open(path).read() == "old"
    assert os.listdir(tmp_path) == ["results.json"]  # no .tmp left


def test_free_space_is_none_where_there_is_no_such_notion(tmp_path, ram_root):
    assert storage.free_bytes(str(tmp_path)) > 0
    assert storage.free_bytes(ram_root) is None


def test_an_unregistered_scheme_is_one_line_naming_the_path_and_what_to_install():
    with pytest.raises(storage.UnsupportedFileSystemError) as error:
        storage.exists("s3://bucket/run")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("s3://bucket/run: TensorFlow has no file system for s3://")
    assert "tensorflow-io" in message and "ram://" in message


def _command_mains():
    from bert_tf import convert, evaluate, predict, sweep, train
    from bert_tf.export import __main__ as export

    return {
        "train": (train.main, ["--config", "s3://b/c.yaml", "--model_dir", "s3://b/run"]),
        "evaluate": (evaluate.main, ["--model_dir", "s3://b/run"]),
        "predict": (predict.main, ["--model_dir", "s3://b/run", "--output_dir", "s3://b/p"]),
        "export": (export.main, ["--model_dir", "s3://b/run", "--export_dir", "s3://b/e"]),
        "convert": (convert.main, ["--input", "s3://b/run", "--output", "s3://b/out"]),
        "sweep": (sweep.main, ["--config", "s3://b/c.yaml", "--init_checkpoint", "s3://b/i",
                               "--model_dir", "s3://b/sweep"]),
    }


@pytest.mark.parametrize("command", ["train", "evaluate", "predict", "export", "convert",
                                     "sweep"])
def test_commands_refuse_an_unregistered_scheme_in_one_line(command, capsys):
    main, argv = _command_mains()[command]
    try:
        code = main(argv)
    except SystemExit as exit_:  # convert checks while parsing, as argparse does
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: --") and "s3://b/" in err[0] and "tensorflow-io" in err[0]


# -- the run lock on object storage --------------------------------------------------------


def test_the_owner_record_locks_heartbeats_and_is_released(ram_root, monkeypatch):
    from bert_tf.training import run_lock

    monkeypatch.setattr(run_lock, "HEARTBEAT_SECONDS", 0.05)
    lock = run_lock.RunLock(ram_root)
    path = storage.join(ram_root, run_lock.LOCK_FILE)
    first = run_lock.read_owner(path)
    assert first["host"] == socket.gethostname() and first["pid"] == os.getpid()
    with pytest.raises(run_lock.RunLockedError, match=f"{ram_root} is in use.*pid {os.getpid()}"):
        run_lock.RunLock(ram_root)
    deadline = time.time() + 10
    while run_lock.read_owner(path)["heartbeat"] == first["heartbeat"]:
        assert time.time() < deadline, "no heartbeat"
        time.sleep(0.05)
    assert run_lock.read_owner(path)["started"] == first["started"]
    lock.release()
    lock.release()
    assert not storage.exists(path)
    run_lock.RunLock(ram_root).release()  # free again


def _write_record(path, **record):
    with storage.open(path, "w", encoding="utf-8") as f:
        json.dump(record, f)


def test_a_live_record_of_another_host_is_honoured_until_stale(ram_root):
    from bert_tf.training import run_lock

    path = storage.join(ram_root, run_lock.LOCK_FILE)
    now = time.time()
    _write_record(path, host="tpu-worker-7", pid=123, started=now - 60, heartbeat=now - 5)
    with pytest.raises(run_lock.RunLockedError, match="pid 123 on tpu-worker-7.*stale after"):
        run_lock.RunLock(ram_root)
    _write_record(path, host="tpu-worker-7", pid=123, started=now - 900,
                  heartbeat=now - run_lock.STALE_AFTER_SECONDS - 1)
    lock = run_lock.RunLock(ram_root)  # taken over
    assert run_lock.read_owner(path)["pid"] == os.getpid()
    lock.release()


def test_a_record_of_a_dead_process_on_this_host_is_taken_over(ram_root):
    from bert_tf.training import run_lock

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    path = storage.join(ram_root, run_lock.LOCK_FILE)
    now = time.time()
    _write_record(path, host=socket.gethostname(), pid=int(dead.stdout), started=now,
                  heartbeat=now)
    run_lock.RunLock(ram_root).release()


def test_a_local_run_directory_keeps_its_flock(tmp_path):
    from bert_tf.training import run_lock

    holder = f"pid {os.getpid()} on {socket.gethostname()}"
    lock = run_lock.RunLock(str(tmp_path / "run"))
    with pytest.raises(run_lock.RunLockedError, match=holder):
        run_lock.RunLock(str(tmp_path / "run"))
    lock.release()
    assert (tmp_path / "run" / ".lock").read_text() == holder  # the last holder stays named
    run_lock.RunLock(str(tmp_path / "run")).release()
