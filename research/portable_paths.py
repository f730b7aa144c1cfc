"""Paths in committed records, written without the machine that ran them.

A run names files as its machine saw them: the data folder, the study's output
folder, installed packages, the interpreter. `portable` rewrites each the way
the docs name it, so that a record reads the same from every clone:

- the data and reference folders -> `../shared/data`, `../shared/reference`
  (their place beside the repository, wherever `BERT_TF_DATA` pointed);
- the output directory a record was saved from -> `OUTPUT_DIR`;
- a path inside the repository -> relative to it;
- an installed package's file -> `<site-packages>/...`;
- the interpreter -> `python`.

`absolute_paths` finds what is left; a test runs it over `research/records`.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from collections.abc import Callable

from tests import shared_data

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT_DIR = "OUTPUT_DIR"
SITE_PACKAGES = "<site-packages>"
# Record files that are text; weights and plots are copied as they are.
TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".md", ".log", ".txt", ".csv", ".tsv")
# A path starting at the root: not part of a word, a URL, a `{placeholder}/...` or a
# relative path. System folders (`/proc/PID/status` in a report) name no machine.
_ABSOLUTE = re.compile(r"(?<![\w.:/~<>{}\-])/(?:[\w.+\-]+/)+[\w.+\-]*")
_SYSTEM_FOLDERS = ("/proc/", "/dev/", "/sys/")


def _variants(path: str) -> list[str]:
    """`path` as given and with its links resolved (a run may print either)."""
    return sorted({os.path.abspath(path), os.path.realpath(path)}, key=len, reverse=True)


def replacements(output_dir: str | None = None) -> list[tuple[str, str]]:
    """`(machine path, portable name)` pairs, the longest machine path first.

    Args:
      output_dir: the output directory the record is saved from, if any.
    """
    pairs = []
    if output_dir is not None:
        pairs += [(path, OUTPUT_DIR) for path in _variants(output_dir)]
    pairs += [(path, "../shared/data") for path in _variants(shared_data.data_dir())]
    pairs += [(path, "../shared/reference") for path in _variants(shared_data.reference_dir())]
    for key in ("purelib", "platlib"):
        pairs += [(path, SITE_PACKAGES) for path in _variants(sysconfig.get_paths()[key])]
    pairs += [(path, "python") for path in _variants(sys.executable)]
    pairs += [(path + os.sep, "") for path in _variants(REPO_ROOT)]
    unique = {}
    for path, name in pairs:
        unique.setdefault(path, name)  # the first name given to a path wins
    return sorted(unique.items(), key=lambda pair: len(pair[0]), reverse=True)


def _replace_all(text: str, pairs: list[tuple[str, str]]) -> str:
    for path, name in pairs:
        text = text.replace(path, name)
    return text


def portable(text: str, output_dir: str | None = None) -> str:
    """`text` with every machine path of `replacements(output_dir)` rewritten.

    Args:
      text: a record file's text.
      output_dir: the output directory the record is saved from, if any.
    """
    return _replace_all(text, replacements(output_dir))


def rewriter(output_dir: str | None) -> Callable[[str, str], str]:
    """`(file name, text) -> text` for records saved from `output_dir`; non-text kept.

    The replacements are worked out once, for every file of a save.
    """
    pairs = replacements(output_dir)

    def rewrite(name: str, text: str) -> str:
        return _replace_all(text, pairs) if name.endswith(TEXT_SUFFIXES) else text

    return rewrite


def absolute_paths(text: str) -> list[str]:
    """The absolute paths left in `text` (system folders such as /proc excepted)."""
    return [path for path in _ABSOLUTE.findall(text) if not path.startswith(_SYSTEM_FOLDERS)]
