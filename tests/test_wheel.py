"""The built wheel, installed non-editable into a fresh venv, runs its commands from anywhere.

The wheel is built from the clone and installed with `--no-deps` into a new
virtual environment whose only link to the test environment is a `.pth` line
naming that environment's site-packages: TensorFlow and the other dependencies
come from there (a full install takes minutes and gigabytes), while bert_tf
itself, including its packaged configs, comes from the wheel alone. Lines of a
`.pth` file are added to `sys.path` without processing the `.pth` files they
hold, so the test environment's editable bert_tf stays out of sight; the test
checks that too. Every command runs in a folder outside the clone.
"""

import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.long

TINY_MODEL = ["--set", "model.encoder.hidden_size=32", "--set", "model.encoder.num_layers=2",
              "--set", "model.encoder.num_heads=2", "--set", "model.encoder.intermediate_size=64",
              "--set", "data.max_seq_length=32", "--set", "data.max_predictions_per_seq=5",
              "--set", "trainer.global_batch_size=8", "--set", "trainer.steps_per_loop=1",
              "--set", "trainer.eval_every=0"]


def _run(command, cwd, env, timeout=600):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout, check=False)
    assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of the fresh venv, its environment, a working folder outside the clone)."""
    root = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
          str(root / "dist"), REPO], cwd=root, env=dict(os.environ))
    (wheel,) = (root / "dist").glob("bert_tf-*.whl")
    venv = root / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)],
         cwd=root, env=dict(os.environ))
    python = str(venv / "bin" / "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                cwd=root, env=dict(os.environ)).stdout.strip()
    with open(os.path.join(site, "test_environment.pth"), "w", encoding="utf-8") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    _run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
         cwd=root, env=env)
    work = root / "elsewhere"
    work.mkdir()
    return python, env, work, wheel


def test_the_wheel_carries_every_packaged_config(installed):
    *_, wheel = installed
    with zipfile.ZipFile(wheel) as archive:
        names = {name for name in archive.namelist() if name.endswith(".yaml")}
    expected = {f"bert_tf/configs/{group}/{name}"
                for group in ("pretrain", "finetune")
                for name in os.listdir(os.path.join(REPO, "configs", group))
                if name.endswith(".yaml")}
    assert expected and names == expected


def test_bert_tf_comes_from_the_wheel_not_the_clone(installed):
    python, env, work, _ = installed
    result = _run([python, "-c", "import bert_tf, bert_tf.configs; "
                   "print(bert_tf.__file__); print(bert_tf.configs.__file__)"], work, env)
    venv = os.path.dirname(os.path.dirname(python))
    paths = result.stdout.split()
    assert len(paths) == 2 and all(path.startswith(venv) for path in paths), paths


def test_python_m_bert_tf_lists_the_commands(installed):
    python, env, work, _ = installed
    result = _run([python, "-m", "bert_tf"], work, env)
    assert "  train " in result.stdout and "  demo " in result.stdout


def test_the_data_commands_come_with_the_wheel(installed):
    python, env, work, _ = installed
    for command in ("wikipedia_to_text", "build_vocab", "create_pretraining_data"):
        result = _run([python, "-m", f"bert_tf.{command}", "--help"], work, env)
        assert result.stdout.startswith(f"usage: python -m bert_tf.{command} "), result.stdout


def test_the_demo_takes_its_first_steps(installed):
    # The demo trains the packaged `pretrain/demo` config by name, from the wheel's copy.
    python, env, work, _ = installed
    _run([python, "-m", "bert_tf.demo", "--model_dir", str(work / "demo"),
          "--set", "trainer.train_steps=2", "--set", "trainer.checkpoint_every=2",
          *TINY_MODEL], work, env)
    assert (work / "demo" / "ckpt-2.index").exists()
