"""The console of every command: our log lines, without TensorFlow's start-up noise.

TensorFlow's C++ runtime logs at ERROR level on every start of a CPU-only
machine (`failed call to cuInit`, oneDNN's `DT_INT32` notice) and its Python
checkpoint code logs `Sharding callback duration` at every save. None of it
asks anything of the user, so by default the C++ log shows only fatal
messages and TensorFlow's Python logger only warnings; `--verbose` shows all
of it. A `TF_CPP_MIN_LOG_LEVEL` the user set is left as it is.
"""

import argparse
import logging
import os

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """Adds `--verbose` (TensorFlow's own log lines, C++ ones included)."""
    parser.add_argument("--verbose", action="store_true",
                        help="also show TensorFlow's own log lines (C++ runtime included)")


def setup(verbose: bool = False) -> None:
    """Configures logging; call before TensorFlow is imported (its C++ log reads the env once).

    Args:
      verbose: show TensorFlow's informational C++ and Python log lines too.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if verbose else "3")
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)


def print_fields(fields: list[tuple[str, object]]) -> None:
    """Prints one `name: value` line per field: a command's closing screen.

    Args:
      fields: (name, value) pairs, printed in order.
    """
    for name, value in fields:
        print(f"{name}: {value}")
