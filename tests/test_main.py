"""`python -m bert_tf` lists every command, and only commands that exist."""

import os
import subprocess
import sys

import pytest

import bert_tf
from bert_tf.__main__ import COMMANDS

PACKAGE_DIR = os.path.dirname(bert_tf.__file__)


def runnable_modules():
    """Names X for which `python -m bert_tf.X` runs something."""
    names = set()
    for entry in os.listdir(PACKAGE_DIR):
        path = os.path.join(PACKAGE_DIR, entry)
        if entry.endswith(".py") and entry != "__main__.py":
            with open(path, encoding="utf-8") as f:
                if 'if __name__ == "__main__":' in f.read():
                    names.add(entry[:-3])
        elif os.path.isfile(os.path.join(path, "__main__.py")):
            names.add(entry)
    return names


def test_the_list_matches_the_runnable_modules():
    assert set(COMMANDS) == runnable_modules()


def test_python_m_bert_tf_prints_the_list_fast():
    result = subprocess.run([sys.executable, "-m", "bert_tf"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    for name in COMMANDS:
        assert f"  {name} " in result.stdout
    # Listing commands must not import TensorFlow (it takes seconds).
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, runpy; sys.argv = ['bert_tf', '--help'];\n"
         "try:\n    runpy.run_module('bert_tf', run_name='__main__')\n"
         "except SystemExit:\n    pass\nprint('tensorflow' in sys.modules)"],
        capture_output=True, text=True, timeout=60, check=False)
    assert probe.stdout.strip().endswith("False"), probe.stdout + probe.stderr


def test_an_unknown_argument_points_at_the_command_module(capsys):
    from bert_tf.__main__ import main

    assert main(["train"]) == 2
    assert "python -m bert_tf.train" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_answers_without_importing_tensorflow(command):
    """`--help` must be instant: importing TensorFlow alone takes seconds."""
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, runpy\nsys.argv = ['x', '--help']\n"
         f"try:\n    runpy.run_module('bert_tf.{command}', run_name='__main__')\n"
         "except SystemExit:\n    pass\nprint('tensorflow' in sys.modules, file=sys.stderr)"],
        capture_output=True, text=True, timeout=120, check=False)
    assert probe.stderr.strip().splitlines()[-1] == "False", probe.stderr[-2000:]
    assert "usage" in probe.stdout.lower() + probe.stderr.lower()


def test_demo_help_describes_the_packaged_configs():
    """`demo --help` states the model and the schedule of both phases the demo trains."""
    import yaml

    from bert_tf import demo, packaged_configs

    text = " ".join(demo.__doc__.split())
    for name in (demo.CONFIG, demo.SECOND_CONFIG):
        with open(packaged_configs.resolve(name), encoding="utf-8") as f:
            config = yaml.safe_load(f)
        encoder, trainer = config["model"]["encoder"], config["trainer"]
        shape = (f"L{encoder['num_layers']}/H{encoder['hidden_size']}/"
                 f"A{encoder['num_heads']}")
        assert shape in text
        assert (f"{trainer['train_steps']} steps of batch {trainer['global_batch_size']} at "
                f"length {config['data']['max_seq_length']}") in text
    assert "tiny" not in text and "minutes" not in text  # no size or time it does not have
