"""The README's main job, shortened: gensim's Wikipedia excerpt to a trained tiny BERT."""

import hashlib
import importlib.util
import os
import re
import runpy
import shlex
import subprocess
import sys

import pytest
import yaml

from bert_tf import demo
from bert_tf.training import precision
from tests.training_runs import REPO, train_env

pytestmark = pytest.mark.slow


def test_the_demo_corpus_is_gensims_copy_of_the_shared_excerpt(shared_file):
    def digest(path):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    assert digest(demo.gensim_dump_path()) == digest(shared_file("corpus", demo.DUMP_NAME))


# The installed twin runs in tests/test_wheel.py; demo_recipe's CI profile trains its phases.
@pytest.mark.long
@pytest.mark.full
def test_demo_builds_corpus_and_vocab_then_trains(tmp_path, monkeypatch, capsys):
    model_dir = tmp_path / "demo"
    # A tiny model, so the test checks the plumbing in seconds (the demo's own
    # configuration is measured in the README, not here).
    command = [sys.executable, "-m", "bert_tf.demo", "--model_dir", str(model_dir),
               "--set", "model.encoder.hidden_size=32", "--set", "model.encoder.num_layers=2",
               "--set", "model.encoder.num_heads=2", "--set", "model.encoder.intermediate_size=64",
               "--set", "data.max_seq_length=32", "--set", "data.max_predictions_per_seq=5",
               "--set", "trainer.global_batch_size=8",
               "--set", "trainer.train_steps=4", "--set", "trainer.steps_per_loop=2",
               "--set", "trainer.eval_every=2", "--set", "trainer.eval_steps=1"]
    result = subprocess.run(command, cwd=REPO, env=train_env(), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    # Each phase's progress names it (off a terminal: log lines); a line says what runs
    # before each phase and before each constant-guess pass.
    assert "phase 1/2 seq 32  step 4/4  loss" in result.stderr
    assert "phase 2/2 seq 32  step 4/4  loss" in result.stderr
    lines = [result.stdout.index(line) for line in (
        "starting phase 1/2 (seq 32, 4 steps): building the model",
        "phase 1/2 (seq 32, 4 steps) done; measuring the constant-guess baselines",
        "starting phase 2/2 (seq 32, 4 steps): building the model",
        "phase 2/2 (seq 32, 4 steps) done; measuring the constant-guess baselines",
        "bert_tf demo: what you got")]
    assert lines == sorted(lines)
    corpus = model_dir / "corpus"
    with open(corpus / "vocab.txt", encoding="utf-8") as f:
        vocab = f.read().splitlines()
    assert len(vocab) == 8000 and vocab[:1] == ["[PAD]"]
    with open(corpus / "wiki.txt", encoding="utf-8") as f:
        documents = f.read().split("\n\n")
    assert len(documents) == 105  # the excerpt's articles (see tests/data/test_wikipedia.py)
    # Phase 1 in its own folder; phase 2, from its weights, in --model_dir.
    assert os.path.exists(model_dir / demo.FIRST_PHASE_DIR / "ckpt-4.index")
    assert os.path.exists(model_dir / "ckpt-4.index")
    # The demo's `auto` precision is resolved by this CPU's flags and recorded.
    with open(model_dir / "params.yaml", encoding="utf-8") as f:
        chosen = yaml.safe_load(f)["runtime"]["mixed_precision"]
    assert chosen == precision.choose_precision("cpu", precision.cpu_flags())[0]
    assert os.listdir(model_dir / "train") and os.listdir(model_dir / "eval")
    # The last screen: held-out accuracies at the first and last evaluation,
    # where everything is, and next steps that work on a demo install.
    screen = result.stdout[result.stdout.index("bert_tf demo: what you got"):]
    # Every evaluation, then the floor measured on the same held-out batches.
    # Every evaluation of both phases (the second's steps after the first's), then the
    # floor measured on the same held-out batches.
    assert re.search(r"held-out accuracy +step +length +masked LM +next sentence\n"
                     r"(?: +[2468] +32 +[\d.]+ % +[\d.]+ %\n){4}"
                     r" +guess +32 +[\d.]+ % +(4\d|5\d)\.\d %\n"
                     r" +\(guess: what a model that learned nothing scores, always '[^']+' and "
                     r"always '(is next|not next)'\)", screen)
    assert [line.split()[0] for line in screen.splitlines()
            if re.match(r" +[2468] +32 ", line)] == ["2", "4", "6", "8"]
    assert f"checkpoints            {model_dir}" in screen
    assert f"TensorBoard            tensorboard --logdir {model_dir}" in screen
    assert f"{demo.EVIDENCE_DOC} in the bert_tf repository" in screen
    # Every `python -m` command on the screen is one of the package's and runs.
    commands = [shlex.split(line[line.index("python -m"):]) for line in screen.splitlines()
                if "python -m" in line]
    assert [command[2] for command in commands] == ["bert_tf.export"]
    # Run as `python -m` runs it, in this process (a subprocess adds a TensorFlow import).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", commands[0][2:])
    with pytest.raises(SystemExit) as export:
        runpy.run_module(commands[0][2], run_name="__main__", alter_sys=True)
    assert export.value.code == 0, capsys.readouterr().err[-3000:]
    assert os.path.isfile(tmp_path / "exports" / "demo" / "1" / "saved_model.pb")


def test_the_demo_screen_prints_only_commands_a_demo_install_has(tmp_path):
    """No command of the research folder (it is not installed) or of another package."""
    from bert_tf import tasks

    os.makedirs(tmp_path / "demo" / "eval")
    phases = [demo.TrainedPhase(tasks.load_experiment(config)[1], str(tmp_path / "demo"), 0, {})
              for config in (demo.CONFIG, demo.SECOND_CONFIG)]
    screen = demo.summary_screen(str(tmp_path / "demo"), phases, 60.0)
    modules = re.findall(r"python -m ([\w.]+)", screen)
    assert modules == ["bert_tf.export"]
    assert all(importlib.util.find_spec(module) for module in modules)
    assert "research" not in screen
    assert "tensorboard --logdir " in screen  # tensorboard is a core dependency


def test_the_accuracy_table_shows_each_evaluation_beside_the_constant_guess():
    from bert_tf.tasks.pretraining import ConstantGuess

    held_out = {"mlm_accuracy": [(100, 0.066), (200, 0.092), (300, 0.111)],
                "nsp_accuracy": [(100, 0.511), (200, 0.511), (300, 0.584)]}
    guesses = {"mlm_accuracy": ConstantGuess(2, 0.0507), "nsp_accuracy": ConstantGuess(1, 0.5107)}
    rows = demo.accuracy_table([demo.HeldOut(128, 0, held_out, guesses)],
                               ["[PAD]", "[UNK]", "the"])
    assert rows[0].split() == ["held-out", "accuracy", "step", "length", "masked", "LM",
                               "next", "sentence"]
    assert [row.split() for row in rows[1:4]] == [
        ["100", "128", "6.6", "%", "51.1", "%"], ["200", "128", "9.2", "%", "51.1", "%"],
        ["300", "128", "11.1", "%", "58.4", "%"]]
    assert rows[4].split() == ["guess", "128", "5.1", "%", "51.1", "%"]
    assert "always 'the' and always 'not next'" in rows[5]
    # A long run shows at most SCREEN_EVALUATIONS + 1 rows, evenly spaced, ending at its last.
    long_run = {"mlm_accuracy": [(step, 0.1) for step in range(20, 3220, 20)]}
    shown = [row.split()[0] for row in
             demo.accuracy_table([demo.HeldOut(128, 0, long_run, {})], [])[1:]]
    assert len(shown) <= demo.SCREEN_EVALUATIONS + 1 and shown[0] == "20"
    assert shown[-1] == "3,200"


def test_a_second_phase_continues_the_step_count_and_shows_its_own_length_and_guess():
    from bert_tf.tasks.pretraining import ConstantGuess

    first = demo.HeldOut(64, 0, {"mlm_accuracy": [(90, 0.07), (720, 0.15)]},
                         {"mlm_accuracy": ConstantGuess(2, 0.049)})
    second = demo.HeldOut(128, 720, {"mlm_accuracy": [(40, 0.13), (80, 0.14)]},
                          {"mlm_accuracy": ConstantGuess(2, 0.051)})
    rows = demo.accuracy_table([first, second], ["[PAD]", "[UNK]", "the"])
    assert [row.split() for row in rows[1:7]] == [
        ["90", "64", "7.0", "%"], ["720", "64", "15.0", "%"], ["760", "128", "13.0", "%"],
        ["800", "128", "14.0", "%"], ["guess", "64", "4.9", "%"], ["guess", "128", "5.1", "%"]]


def test_an_evaluation_without_accuracies_gives_no_table():
    assert demo.accuracy_table([demo.HeldOut(128, 0, {"loss": [(2, 7.5)]}, {})], []) == []


def test_a_phase_config_that_does_not_exist_is_a_one_line_error_before_any_training(
        tmp_path, capsys):
    model_dir = tmp_path / "demo"
    corpus = model_dir / "corpus"
    os.makedirs(corpus)
    # The corpus files exist, so the demo goes straight to the phases' configs.
    (corpus / "wiki.txt").write_text("One sentence.\nAnother one.\n", encoding="utf-8")
    (corpus / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    code = demo.main(["--model_dir", str(model_dir), "--dump", str(corpus / "wiki.txt"),
                      "--second_phase", "pretrain/no_such_phase"])
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --config pretrain/no_such_phase: no such file")
    assert "Traceback" not in error
    assert not os.path.exists(model_dir / demo.FIRST_PHASE_DIR)  # phase 1 never started


def test_the_demo_says_what_runs_before_each_phase_and_plans_the_whole_run(
        tmp_path, monkeypatch, capsys):
    """The lines between the phases, in order, and the plan each phase's bar gets."""
    from bert_tf import train
    from bert_tf.tasks.pretraining import PretrainingTask

    model_dir = tmp_path / "demo"
    corpus = model_dir / "corpus"
    os.makedirs(corpus)
    (corpus / "wiki.txt").write_text("One sentence.\nAnother one.\n", encoding="utf-8")
    (corpus / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    plans = []

    def fake_run(task_class, experiment, run_dir, init_checkpoint=None, plan=None):
        plans.append(plan)
        print(f"(trains {run_dir})")
        return 0

    def fake_guesses(task, batch_size, steps):
        print(f"(counts {steps} batches at length {task.data.max_seq_length})")
        return {}

    monkeypatch.setattr(train, "run", fake_run)
    monkeypatch.setattr(PretrainingTask, "constant_guesses", fake_guesses)
    monkeypatch.setattr(demo, "_at_last_step", lambda run_dir, train_steps: True)
    monkeypatch.setattr(demo, "summary_screen", lambda *args: "(the last screen)")
    assert demo.main(["--model_dir", str(model_dir), "--dump", str(corpus / "wiki.txt")]) == 0
    first = model_dir / demo.FIRST_PHASE_DIR
    assert capsys.readouterr().out.splitlines() == [
        "starting phase 1/2 (seq 64, 720 steps): building the model and its input pipeline...",
        f"(trains {first})",
        "phase 1/2 (seq 64, 720 steps) done; measuring the constant-guess baselines on its "
        "8 held-out batches...",
        "(counts 8 batches at length 64)",
        "starting phase 2/2 (seq 128, 80 steps): building the model and its input pipeline...",
        f"(trains {model_dir})",
        "phase 2/2 (seq 128, 80 steps) done; measuring the constant-guess baselines on its "
        "8 held-out batches...",
        "(counts 8 batches at length 128)",
        "(the last screen)"]
    # Each phase's bar knows both phases, which one it is, and when the phase began.
    assert [plan.current for plan in plans] == [0, 1]
    assert [plan.label for plan in plans] == ["phase 1/2 seq 64", "phase 2/2 seq 128"]
    assert plans[0].phases == plans[1].phases
    assert [phase.train_steps for phase in plans[0].phases] == [720, 80]
    assert plans[0].started <= plans[1].started


def test_a_phase_step_costs_its_matmul_flops():
    """Phase 2's steps hold phase 1's tokens; attention and the MLM head make them dearer."""
    from bert_tf import tasks

    first, second = (tasks.load_experiment(config)[1]
                     for config in (demo.CONFIG, demo.SECOND_CONFIG))
    # BERT-mini at length 64, batch 128, 22 MLM slots in a row of up to 3 sequences:
    # 3 x 128 x (64 x 4 x (8h^2 + 4hi + 4sh) + 2h^2 + 22 x (2h^2 + 2hV)).
    assert demo.step_matmul_flops(first) == 196_821_909_504
    ratio = demo.step_matmul_flops(second) / demo.step_matmul_flops(first)
    assert 1.01 < ratio < 1.03
