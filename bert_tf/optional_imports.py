"""Imports of packages bert_tf does not install, with a one-line error when absent.

The commands catch `MissingDependencyError` and print its message: the
package to install and the pip command, instead of an import traceback.
"""

import importlib
import re
import types


class MissingDependencyError(ImportError):
    """A package that one feature needs is not installed; the message says how to install it."""


def import_optional(module: str, package: str, purpose: str,
                    pip_spec: str | None = None) -> types.ModuleType:
    """Imports `module`, or raises `MissingDependencyError` naming the pip command.

    Args:
      module: the module to import, e.g. "official.nlp.modeling.networks".
      package: the distribution that provides it, e.g. "tf-models-official".
      purpose: what needs it, e.g. "Model Garden interop".
      pip_spec: what to `pip install` (default: `package`), e.g. with a version pin.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        spec = pip_spec or package
        # Quoted only when a shell would read a character of it (`=`, `<`, `[`...).
        shown = spec if re.fullmatch(r"[\w.-]+", spec) else f"'{spec}'"
        raise MissingDependencyError(f"{purpose} needs the {package} package, which is not "
                                     f"installed: pip install {shown}") from e
