"""`__version__` lives in bert_tf/version.py: setup.cfg reads it, the root re-exports it."""

import configparser
import importlib
import os
import re

import bert_tf
from bert_tf import version

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_setup_cfg_reads_the_version_module():
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    target = setup["metadata"]["version"].removeprefix("attr:").strip()
    module, _, attribute = target.rpartition(".")
    assert (module, attribute) == ("bert_tf.version", "__version__")
    assert getattr(importlib.import_module(module), attribute) == bert_tf.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version.__version__)


def test_no_module_imports_the_version_from_the_package_root():
    # Low-level modules (checkpoint and export metadata) import bert_tf.version,
    # never the root, whose lazy entry points reach back into them.
    offenders = []
    for root, _, files in os.walk(os.path.join(REPO, "bert_tf")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if re.search(r"^import bert_tf$|^from bert_tf import __version__|"
                             r"\bbert_tf\.__version__\b", text, re.MULTILINE):
                    offenders.append(os.path.relpath(path, REPO))
    assert offenders == []
