"""Storage that fails under a running job: one line naming the path, nothing good lost.

Each fault appears mid-run, after a checkpoint: garbage bytes in a training or
an evaluation file, a TFRecord training shard overwritten or cut while a trainer
reads it (and, in the reader alone, while it is read), an evaluation shard cut, a
training file that loses its read permission, a run directory that turns
read-only, and a read error already in the input pipeline's buffers when a
checkpoint is written. Each stops the run with one `error:` line naming the
path and what went wrong, keeps the newest good checkpoint, and the same
command, once the fault is repaired, resumes from that checkpoint.

The fast tests train a tiny model in this process; the trainer processes
killed or starved mid-run are in the second test command (`long`).
"""

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time

import corpus_task
import pytest
import records_task
import tensorflow as tf
import yaml
from conftest import checkpoint_weights, max_weight_difference, start_until_step, tiny_experiment

from bert_tf.data import records
from bert_tf.training import checkpointing, input_faults

pytestmark = pytest.mark.slow

# The kernel refuses to read this sysctl file whatever the caller's capabilities: sysctl
# files check their mode bits (write-only here) even for root, who reads any other file.
_UNREADABLE_EVEN_FOR_ROOT = "/proc/sys/vm/drop_caches"


def _error_lines(stderr):
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _write(tmp_path, experiment):
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return str(path)


@pytest.fixture
def small_corpus(tmp_path, bert_corpus):
    """Two short corpus files of two documents each: the endless input re-reads them often."""
    source = os.path.join(bert_corpus, sorted(os.listdir(bert_corpus))[0])
    lines = open(source, encoding="utf-8").read().splitlines()
    folder = tmp_path / "corpus"
    folder.mkdir()
    paths = []
    for index in range(2):
        part = lines[index * 10:(index + 1) * 10]
        path = folder / f"part_{index}.txt"
        path.write_text("\n".join(part[:5]) + "\n\n" + "\n".join(part[5:]) + "\n")
        paths.append(path)
    return paths


@pytest.fixture
def fast_experiment(small_corpus, tmp_path, monkeypatch):
    """A run of `corpus_task` on `small_corpus`: 12 steps, a checkpoint every 2."""
    corpus_task.register(monkeypatch)
    return _twelve_steps("corpus_lines", small_corpus, tmp_path)


def _twelve_steps(task, train_files, tmp_path):
    """The fault tests' experiment of `task` on `train_files`: 12 steps, a checkpoint every 2."""
    return {
        "task": task,
        "data": {"train_files": [str(path) for path in train_files],
                 "vocab_file": corpus_task.write_vocab(tmp_path / "vocab.txt")},
        "optimizer": {"learning_rate": 1e-3, "warmup_steps": 2},
        "trainer": {"train_steps": 12, "global_batch_size": 4, "steps_per_loop": 1,
                    "checkpoint_every": 2, "eval_every": 0, "eval_steps": 1,
                    "max_to_keep": 3},
        "runtime": {"strategy": "cpu", "deterministic": True, "seed": 3},
    }


def _train_in_process(config, model_dir):
    from bert_tf import tasks, train

    task_class, experiment = tasks.load_experiment(config, [])
    return train.run(task_class, experiment, str(model_dir))


@contextlib.contextmanager
def _after_checkpoint(step, fault, before_save=False):
    """Calls `fault()` once, when the run saves its checkpoint of `step` (after it, or before)."""
    real_save = checkpointing.TrainingCheckpoint.save
    pending = [True]

    def save(checkpoint):
        due = pending[0] and int(checkpoint.step.numpy()) == step
        if due and before_save:
            pending[0] = False
            fault(checkpoint)
        path = real_save(checkpoint)
        if due and not before_save:
            pending[0] = False
            fault(checkpoint)
        return path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpointing.TrainingCheckpoint, "save", save)
        yield
    assert not pending[0], f"the run never saved step {step}"


def _stops_with_one_line(config, model_dir, capsys, *expected):
    """Runs the config, which must stop with one error line holding `expected`; returns it."""
    assert _train_in_process(config, model_dir) == 1
    (error,) = _error_lines(capsys.readouterr().err)
    for words in expected:
        assert words in error, error
    return error


def _resumes_from_the_newest(config, model_dir, caplog, capsys):
    """The repaired run resumes from the newest checkpoint (none set aside) and finishes."""
    latest = tf.train.latest_checkpoint(str(model_dir))
    step = int(latest.rsplit("-", 1)[1])
    with caplog.at_level(logging.INFO):
        assert _train_in_process(config, model_dir) == 0, capsys.readouterr().err[-3000:]
    log = [record.getMessage() for record in caplog.records]
    assert f"resumed from {latest} (step {step})" in log, log
    assert not _error_lines(capsys.readouterr().err)
    assert not [name for name in os.listdir(model_dir) if name.endswith(".damaged")]
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-12")
    return log


def _overwrite_middle(path, garbage):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + len(garbage)] = garbage
    path.write_bytes(bytes(data))


def test_garbage_in_a_training_file_stops_with_its_line_and_resumes(
        fast_experiment, small_corpus, tmp_path, capsys, caplog):
    corpus = small_corpus[1]
    good = corpus.read_bytes()
    config = _write(tmp_path, fast_experiment)
    model_dir = tmp_path / "run"
    # Bytes that are no UTF-8 text, as a disk or a copy gone wrong leaves them.
    with _after_checkpoint(4, lambda _: _overwrite_middle(corpus, bytes(range(128, 256)))):
        error = _stops_with_one_line(
            config, model_dir, capsys, "cannot read the training data",
            f"{corpus}: line ", "is not UTF-8 text")
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert f"({os.path.basename(latest)}) is kept" in error
    corpus.write_bytes(good)
    _resumes_from_the_newest(config, model_dir, caplog, capsys)



def test_garbage_in_an_evaluation_file_keeps_the_steps_before_it(
        fast_experiment, small_corpus, tmp_path, capsys, caplog):
    held_out = tmp_path / "held_out.txt"
    shutil.copyfile(small_corpus[0], held_out)
    good = held_out.read_bytes()
    fast_experiment["data"]["eval_files"] = [str(held_out)]
    fast_experiment["trainer"]["eval_every"] = 6
    config = _write(tmp_path, fast_experiment)
    model_dir = tmp_path / "run"
    # Zeros, as a crash leaves them in a file's unwritten blocks; the first evaluation reads it.
    with _after_checkpoint(2, lambda _: _overwrite_middle(held_out, bytes(64))):
        error = _stops_with_one_line(config, model_dir, capsys,
                                     "cannot read the evaluation data", f"{held_out}: line ",
                                     "NUL byte", "(ckpt-6) is kept")
    assert "Traceback" not in error
    held_out.write_bytes(good)
    log = _resumes_from_the_newest(config, model_dir, caplog, capsys)
    # The evaluation that failed runs first.
    evaluated = [line.split(":")[0] for line in log if line.startswith("eval at step")]
    assert evaluated == ["eval at step 6", "eval at step 12"], log


def _make_unreadable(path):
    """Takes `path`'s read permission away for this process; returns how it was done.

    Root reads any file whatever its mode, so for root the file is replaced by
    a link to a sysctl file, which the kernel refuses to read to everyone (a
    mode of 0 would test nothing). Either way the read fails in the kernel
    with EACCES, as it does for a file that lost its permission.
    """
    if os.geteuid() != 0:
        os.chmod(path, 0)
        return "chmod 0"
    try:
        open(_UNREADABLE_EVEN_FOR_ROOT, "rb").close()
    except PermissionError:
        path.unlink()
        os.symlink(_UNREADABLE_EVEN_FOR_ROOT, path)
        return f"a link to {_UNREADABLE_EVEN_FOR_ROOT}"
    pytest.fail(f"running as root and {_UNREADABLE_EVEN_FOR_ROOT} reads: no way to make a "
                "file unreadable here")


def test_a_training_file_without_read_permission_stops_with_one_line_and_resumes(
        fast_experiment, small_corpus, tmp_path, capsys, caplog):
    corpus = small_corpus[1]
    good = corpus.read_bytes()
    config = _write(tmp_path, fast_experiment)
    model_dir = tmp_path / "run"
    with _after_checkpoint(4, lambda _: _make_unreadable(corpus)):
        error = _stops_with_one_line(config, model_dir, capsys, "cannot read the training data",
                                     f"{corpus}: Permission denied")
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert f"({os.path.basename(latest)}) is kept" in error
    # Not repaired yet: the same command says so in one line, before training.
    _stops_with_one_line(config, model_dir, capsys, f"{corpus}: Permission denied",
                         f"({os.path.basename(latest)}) is kept")
    corpus.unlink()
    corpus.write_bytes(good)
    _resumes_from_the_newest(config, model_dir, caplog, capsys)


@contextlib.contextmanager
def _read_only_directory(path):
    """Makes `path` take no new files while the body runs, as a remount read-only does.

    Root writes into any directory whatever its mode, so for root `path` gets a
    read-only bind mount of itself (the files the run holds open stay writable,
    as on a real remount); otherwise its mode drops the write bits.
    """
    if os.geteuid() != 0:
        os.chmod(path, 0o555)
        try:
            yield "Permission denied"
        finally:
            os.chmod(path, 0o755)
        return
    for command in (["mount", "--bind", str(path), str(path)],
                    ["mount", "-o", "remount,bind,ro", str(path)]):
        mounted = subprocess.run(command, capture_output=True, text=True, check=False)
        if mounted.returncode != 0:
            subprocess.run(["umount", str(path)], check=False)
            # No skip: without this the test would check nothing.
            pytest.fail(f"cannot make {path} read-only for root: {mounted.stderr.strip()}")
    try:
        yield "Read-only file system"
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_a_read_only_run_directory_keeps_the_last_checkpoint_and_resumes(
        fast_experiment, tmp_path, capsys, caplog):
    config = _write(tmp_path, fast_experiment)
    model_dir = tmp_path / "run"
    with contextlib.ExitStack() as stack:
        reasons = []
        with _after_checkpoint(4, lambda _: reasons.append(
                stack.enter_context(_read_only_directory(model_dir)))):
            _stops_with_one_line(config, model_dir, capsys,
                                 f"cannot write checkpoints to {model_dir}",
                                 "could not save step 6", f"({model_dir}/ckpt-4) is kept")
        assert not [name for name in os.listdir(model_dir) if name.endswith("_temp")]
        assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-4")
        # Still read-only: the same command stops in one line naming the directory.
        _stops_with_one_line(config, model_dir, capsys,
                             f"cannot write the run directory {model_dir}: {reasons[0]}")
    _resumes_from_the_newest(config, model_dir, caplog, capsys)


def _holds_error(prefix, words):
    """Whether checkpoint `prefix` holds an error saying `words` (in its saved input state).

    The input state is a serialized variant, which the checkpoint reader cannot
    hand back; its buffered errors are stored as their message text.
    """
    data = b"".join(open(path, "rb").read() for path in tf.io.gfile.glob(prefix + ".data-*"))
    return words.encode() in data


# The fast variant checks the resume; the long one also compares it with an uninterrupted run.
@pytest.mark.parametrize("against_an_uninterrupted_run",
                         [False, pytest.param(True, marks=pytest.mark.long)])
def test_a_read_error_buffered_when_a_checkpoint_is_written_costs_no_step(
        fast_experiment, small_corpus, tmp_path, capsys, caplog, request,
        against_an_uninterrupted_run):
    corpus = small_corpus[1]
    backup = tmp_path / "part_1.bak"
    shutil.copyfile(corpus, backup)
    # Op determinism makes tf.data read on demand: nothing is read ahead then. (It is
    # process-wide: an earlier test's run may have turned it on.)
    fast_experiment["runtime"]["deterministic"] = False
    from tensorflow.python.framework import config as tf_config  # no public switch-off

    if tf_config.is_op_determinism_enabled():
        tf_config.disable_op_determinism()
        request.addfinalizer(tf_config.enable_op_determinism)
    # Two checkpoints kept: when both hold the error, the input starts over from the
    # start of the data (else from the older one).
    fast_experiment["trainer"]["max_to_keep"] = 2
    config = _write(tmp_path, fast_experiment)
    model_dir = tmp_path / "run"

    def wait_until_the_input_state_holds_the_error(checkpoint):
        # The steps since the file went missing freed room in the pipeline's buffers, and
        # its background threads, reading ahead, met the missing file: wait (at most 30 s)
        # until the input state holds the error, as the save will write it.
        probe = tf.train.Checkpoint(input=checkpoint.iterator)
        for attempt in range(300):
            if _holds_error(probe.write(str(tmp_path / "probe" / f"state_{attempt}")),
                            "No such file or directory"):
                return
            time.sleep(0.1)

    def lose_the_file_once_the_pipeline_has_read_ahead(_):
        time.sleep(1.0)  # the pipeline's buffers fill with the batches of the next steps
        corpus.unlink()

    with _after_checkpoint(4, lose_the_file_once_the_pipeline_has_read_ahead), \
            _after_checkpoint(6, wait_until_the_input_state_holds_the_error, before_save=True):
        _stops_with_one_line(config, model_dir, capsys, f"{corpus}: No such file or directory")
    latest = tf.train.latest_checkpoint(str(model_dir))
    # The premise: the newest checkpoint's input state holds the error.
    assert _holds_error(latest, "No such file or directory"), latest
    shutil.copyfile(backup, corpus)
    log = _resumes_from_the_newest(config, model_dir, caplog, capsys)
    assert any("holds the read error of" in line and str(corpus) in line for line in log), log
    assert any("its input state is not used; the input position is re-derived" in line
               for line in log), log
    if not against_an_uninterrupted_run:
        return
    # The batches were an uninterrupted run's: its weights, to float rounding (the run
    # is not under op determinism).
    uninterrupted = tmp_path / "uninterrupted"
    assert _train_in_process(config, uninterrupted) == 0
    assert max_weight_difference(checkpoint_weights(model_dir),
                                 checkpoint_weights(uninterrupted)) < 1e-6


def _record_shard(tmp_path, count=24):
    from bert_tf.data.records import PretrainingRecordWriter

    path = tmp_path / "shard.tfrecord"
    with PretrainingRecordWriter([str(path)]) as writer:
        for index in range(count):
            writer.write({"input_ids": [index % 50] * 8, "input_mask": [1] * 8,
                          "segment_ids": [0] * 8, "masked_lm_positions": [1, 2],
                          "masked_lm_ids": [3, 4], "masked_lm_weights": [1.0, 1.0],
                          "next_sentence_labels": [index % 2]})
    return path


@pytest.mark.parametrize("fault", ["garbage", "truncated"])
def test_a_record_shard_damaged_while_read_is_named_in_one_line(tmp_path, fault):
    path = _record_shard(tmp_path)
    good = path.read_bytes()
    dataset = records.read_pretraining_records(str(path), batch_size=2, num_epochs=None)
    batches = iter(dataset)
    next(batches)  # validated and reading
    if fault == "garbage":
        _overwrite_middle(path, os.urandom(40))
    else:
        # Cut inside a record: a cut between two records leaves a valid, shorter file.
        path.write_bytes(good[:len(good) * 2 // 3 + 5])
    with pytest.raises(input_faults.InputReadError) as raised:
        with input_faults.stop_on_read_error("training", lambda: None):
            for _ in range(100):  # the endless reader comes back to the file
                next(batches)
    message = str(raised.value)
    assert "\n" not in message
    assert f"{path}: is a corrupt TFRecord file" in message, message
    assert raised.value.file == str(path)
    assert not input_faults.reads_cleanly(raised.value.fault)
    path.write_bytes(good)
    assert input_faults.reads_cleanly(raised.value.fault)


@pytest.fixture
def record_experiment(tmp_path, monkeypatch):
    """`fast_experiment` on two TFRecord shards of 8 records: 4 steps read both once."""
    records_task.register(monkeypatch)
    folder = tmp_path / "shards"
    folder.mkdir()
    shards = [records_task.write_shard(folder / f"part-{index}.tfrecord", count=8)
              for index in range(2)]
    return shards, _twelve_steps("record_labels", shards, tmp_path)


def _damage_shard(path, fault):
    """Garbage bytes in the middle of the TFRecord shard `path`, or the shard cut in a record."""
    if fault == "garbage":
        _overwrite_middle(path, os.urandom(40))
    else:
        data = path.read_bytes()
        path.write_bytes(data[:len(data) * 2 // 3 + 5])


# A cut shard is the fast case; garbage in a training file has its fast trainer test in
# text form above, and the shard reader meets both kinds fast.
@pytest.mark.parametrize("fault", ["truncated", pytest.param("garbage", marks=pytest.mark.long)])
def test_a_training_shard_damaged_mid_run_stops_with_one_line_and_resumes(
        record_experiment, tmp_path, capsys, caplog, fault):
    shards, experiment = record_experiment
    shard = shards[1]
    good = shard.read_bytes()
    config = _write(tmp_path, experiment)
    model_dir = tmp_path / "run"
    with _after_checkpoint(4, lambda _: _damage_shard(shard, fault)):
        error = _stops_with_one_line(config, model_dir, capsys, "cannot read the training data",
                                     f"{shard}: is a corrupt TFRecord file")
    latest = tf.train.latest_checkpoint(str(model_dir))
    # The newest checkpoint is the one the line keeps, and it reads back.
    assert f"({os.path.basename(latest)}) is kept" in error, error
    assert int(latest.rsplit("-", 1)[1]) >= 4
    checkpoint_weights(model_dir)
    # Not repaired yet: the same command stops in one line naming the shard, before training.
    _stops_with_one_line(config, model_dir, capsys, f"{shard}: ",
                         f"({os.path.basename(latest)}) is kept")
    assert tf.train.latest_checkpoint(str(model_dir)) == latest
    shard.write_bytes(good)
    _resumes_from_the_newest(config, model_dir, caplog, capsys)


# The fast suite meets a damaged evaluation file in text form (garbage, above).
@pytest.mark.long
def test_a_damaged_evaluation_shard_keeps_the_steps_before_it(
        record_experiment, tmp_path, capsys, caplog):
    shards, experiment = record_experiment
    held_out = records_task.write_shard(tmp_path / "held_out.tfrecord", count=8)
    good = held_out.read_bytes()
    experiment["data"]["eval_files"] = [str(held_out)]
    experiment["trainer"]["eval_every"] = 6
    config = _write(tmp_path, experiment)
    model_dir = tmp_path / "run"
    # The shard is cut after the run began; the first evaluation builds its pipeline on it.
    # (Garbage takes the same path: the framing check when the pipeline is built.)
    with _after_checkpoint(2, lambda _: _damage_shard(held_out, "truncated")):
        _stops_with_one_line(config, model_dir, capsys, "cannot read the evaluation data",
                             f"{held_out}: truncated TFRecord file", "(ckpt-6) is kept")
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-6")
    held_out.write_bytes(good)
    log = _resumes_from_the_newest(config, model_dir, caplog, capsys)
    # The evaluation that failed runs first.
    evaluated = [line.split(":")[0] for line in log if line.startswith("eval at step")]
    assert evaluated == ["eval at step 6", "eval at step 12"], log


# A real trainer process stopped mid-run: the second test command.
# Root reads any file whatever its mode: for root the trainer runs without the two
# capabilities that let it (the kernel then checks the mode bits, as for any user).
_WITHOUT_READ_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


@pytest.mark.long
@pytest.mark.parametrize("fault", ["missing", "unreadable"])
def test_a_training_file_lost_mid_run_stops_with_one_line_and_resumes(
        tmp_path, bert_corpus, shared_file, fault):
    # One short file of two documents: the endless input re-reads it every few steps.
    source = os.path.join(bert_corpus, sorted(os.listdir(bert_corpus))[0])
    lines = open(source, encoding="utf-8").read().splitlines()[:60]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines[:30]) + "\n\n" + "\n".join(lines[30:]) + "\n")
    backup = tmp_path / "corpus.bak"
    shutil.copyfile(corpus, backup)
    experiment = tiny_experiment(bert_corpus, shared_file("vocab", "bert-base-uncased-vocab.txt"),
                                 trainer={"train_steps": 100000, "steps_per_loop": 1,
                                          "checkpoint_every": 3, "eval_every": 0})
    experiment["data"].update(train_files=[str(corpus)], eval_holdout_every=0)
    config = _write(tmp_path, experiment)
    model_dir = tmp_path / "run"

    prefix = _WITHOUT_READ_OVERRIDE if fault == "unreadable" and os.geteuid() == 0 else []
    process, output = start_until_step(config, model_dir, 4, prefix=prefix)
    if fault == "missing":
        corpus.unlink()
    else:
        os.chmod(corpus, 0)
    output += process.stdout.readlines()
    assert process.wait(timeout=120) == 1, "".join(output[-30:])
    (error,) = _error_lines("".join(output))
    reason = "No such file or directory" if fault == "missing" else "Permission denied"
    assert f"{corpus}: {reason}" in error, error
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest is not None and f"({os.path.basename(latest)}) is kept" in error, error

    # Repaired: the same command resumes from the newest checkpoint (one saved while
    # the input pipeline already held the error gets its input position re-derived).
    if fault == "missing":
        shutil.copyfile(backup, corpus)
    else:
        os.chmod(corpus, 0o644)
    step = int(latest.rsplit("-", 1)[1])
    process, output = start_until_step(config, model_dir, step + 1, prefix=prefix)
    process.send_signal(signal.SIGTERM)
    output += process.stdout.readlines()
    log = "".join(output)
    assert process.wait(timeout=120) == 0, log[-3000:]
    assert f"resumed from {latest} (step {step})" in log
    assert not _error_lines(log)


def _train_in_process(config, model_dir):
    from bert_tf import tasks, train

    task_class, experiment = tasks.load_experiment(config, [])
    return train.run(task_class, experiment, str(model_dir))


@pytest.mark.long
def test_a_failing_evaluation_keeps_the_steps_before_it(write_config, tmp_path, bert_corpus,
                                                        capsys, caplog):
    eval_file = tmp_path / "eval" / "held_out.txt"
    config = write_config(
        data={"eval_files": [str(eval_file)]},
        trainer={"train_steps": 4, "steps_per_loop": 1, "checkpoint_every": 100,
                 "eval_every": 2, "eval_steps": 1})
    model_dir = tmp_path / "run"
    assert _train_in_process(config, model_dir) == 1
    (error,) = _error_lines(capsys.readouterr().err)
    assert "cannot read the evaluation data" in error and str(eval_file) in error, error
    # The step's checkpoint was written before the evaluation ran.
    assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")
    assert "(ckpt-2) is kept" in error

    eval_file.parent.mkdir()
    shutil.copyfile(os.path.join(bert_corpus, sorted(os.listdir(bert_corpus))[0]), eval_file)
    with caplog.at_level(logging.INFO):
        assert _train_in_process(config, model_dir) == 0
    log = [record.getMessage() for record in caplog.records]
    assert f"resumed from {model_dir / 'ckpt-2'} (step 2)" in log
    # The evaluation that failed runs first, then training goes on.
    evaluated = [i for i, line in enumerate(log) if line.startswith("eval at step")]
    trained = [i for i, line in enumerate(log) if line.startswith("step ")]
    assert [log[i].split(":")[0] for i in evaluated] == ["eval at step 2", "eval at step 4"]
    assert evaluated[0] < trained[0], log
