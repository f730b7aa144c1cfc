"""The console of every command: our log lines, without TensorFlow's start-up noise.

TensorFlow's C++ runtime logs at ERROR level on every start of a CPU-only
machine (`failed call to cuInit`, oneDNN's `DT_INT32` notice) and its Python
checkpoint code logs `Sharding callback duration` at every save. None of it
asks anything of the user, so by default the C++ log shows only fatal
messages and TensorFlow's Python logger only warnings; `--verbose` shows all
of it. A `TF_CPP_MIN_LOG_LEVEL` the user set is left as it is.
"""

import argparse
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator

LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"
# Set by `setup`: whether third-party lines are shown (see `third_party_quiet`).
_VERBOSE = False


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """Adds `--verbose` (TensorFlow's own log lines, C++ ones included)."""
    parser.add_argument("--verbose", action="store_true",
                        help="also show TensorFlow's own log lines (C++ runtime included)")


def setup(verbose: bool = False) -> None:
    """Configures logging; call before TensorFlow is imported (its C++ log reads the env once).

    Args:
      verbose: show TensorFlow's informational C++ and Python log lines too.
    """
    global _VERBOSE
    _VERBOSE = verbose
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


@contextlib.contextmanager
def third_party_quiet() -> Iterator[None]:
    """Holds back what a third-party converter prints while it runs, unless `--verbose`.

    tf2onnx and ONNX Runtime's quantizer log progress through Python logging
    (tens of lines per export), and the TensorFlow graph optimiser that tf2onnx calls writes absl
    lines straight to file descriptor 2, which `TF_CPP_MIN_LOG_LEVEL` does not
    reach. Inside the context both are held back; when the body raises, the
    held-back native lines are printed after all, since they may explain it.
    """
    if _VERBOSE:
        yield
        return
    # Below ERROR, whatever level a library set on its own loggers.
    logging.disable(logging.WARNING)
    sys.stderr.flush()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved_fd, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            logging.disable(logging.NOTSET)
