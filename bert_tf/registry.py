"""Registries: the one way a package lets other code plug in an implementation.

A `Registry` maps names to entries of one base class, in registration order
(which some registries use, e.g. checkpoint-format detection). It is a
`dict`, so reading it is plain dictionary access; adding goes through `add`,
which checks the type and refuses a name that is taken, and `lookup` names
the known entries when a name is unknown.

An entry can also be registered lazily, by the import path of the object
(`add_lazy`): its module is imported when `lookup` first names it, so a
package can list built-in entries whose modules are expensive to import
(the tasks import TensorFlow). Until then the dictionary holds a
`LazyEntry` under that name.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

Entry = TypeVar("Entry")


@dataclasses.dataclass(frozen=True)
class LazyEntry:
    """Stands for an entry not imported yet.

    Attributes:
      path: "package.module.attribute" of the entry.
    """

    path: str

    def load(self):
        """Imports the module and returns the attribute."""
        module, _, attribute = self.path.rpartition(".")
        return getattr(importlib.import_module(module), attribute)


class Registry(dict, Generic[Entry]):
    """Name -> entry, for entries that carry their own `name`.

    Args:
      what: what an entry is, for messages, e.g. "checkpoint format".
      base: the class every entry must be an instance of (with `classes`, a
        subclass of); or its "package.module.Class" path, imported at the
        first check, so that creating the registry imports nothing.
      classes: the entries are classes (subclasses of `base`), not instances.
      validate: called with each entry of the right type before it is
        registered (a lazy one when imported); raises to refuse it.
    """

    def __init__(self, what: str, base: type | str, *, classes: bool = False,
                 validate: Callable[[Entry], None] | None = None):
        super().__init__()
        self.what = what
        self.base = base
        self.classes = classes
        self.validate = validate

    def add(self, entry: Entry) -> Entry:
        """Registers `entry` under `entry.name`; returns it.

        Raises:
          TypeError: `entry` is not an instance (or subclass) of `base`.
          ValueError: its name is empty or registered already.
          Whatever `validate` raises.
        """
        self._check(entry)
        name = entry.name
        if not name:
            raise ValueError(f"{entry!r}: a {self.what} needs a name")
        self._check_free(name)
        self[name] = entry
        return entry

    def add_lazy(self, name: str, path: str) -> None:
        """Registers the entry at import path `path` under `name`, imported when first looked up.

        Args:
          name: the entry's name (its `name` must match, checked at import).
          path: "package.module.attribute" of the entry.

        Raises:
          ValueError: `name` is registered already.
        """
        self._check_free(name)
        self[name] = LazyEntry(path)

    def lookup(self, name: str) -> Entry:
        """The entry registered as `name` (imported now if registered lazily).

        Raises:
          ValueError: naming the unknown name and the registered ones.
        """
        if name not in self:
            raise ValueError(f"unknown {self.what} {name!r}; expected one of {tuple(self)}")
        entry = self[name]
        if isinstance(entry, LazyEntry):
            entry = entry.load()
            self._check(entry)
            if entry.name != name:
                raise ValueError(f"{entry!r} is registered as {self.what} {name!r} but is "
                                 f"named {entry.name!r}")
            self[name] = entry
        return entry

    def copy(self) -> Registry[Entry]:
        """A registry of the same kind holding the same entries (e.g. to add some in a test)."""
        copy = Registry(self.what, self.base, classes=self.classes, validate=self.validate)
        copy.update(self)
        return copy

    def _check(self, entry):
        """Type, then `validate`."""
        base = LazyEntry(self.base).load() if isinstance(self.base, str) else self.base
        if self.classes:
            if not (isinstance(entry, type) and issubclass(entry, base)):
                raise TypeError(f"expected a subclass of {base.__module__}."
                                f"{base.__qualname__}, got {entry!r}")
        elif not isinstance(entry, base):
            raise TypeError(f"expected a {base.__name__}, got {type(entry).__name__}")
        if self.validate is not None:
            self.validate(entry)

    def _check_free(self, name):
        if name in self:
            raise ValueError(f"{self.what} {name!r} is registered already ({self[name]!r})")
