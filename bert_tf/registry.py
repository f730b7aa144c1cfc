"""Registries: the one way a package lets other code plug in an implementation.

A `Registry` maps names to instances of one base class, in registration
order (which some registries use, e.g. checkpoint-format detection). It is a
`dict`, so reading it is plain dictionary access; adding goes through `add`,
which checks the type and refuses a name that is taken, and `lookup` names
the known entries when a name is unknown.
"""

from __future__ import annotations

from typing import Generic, TypeVar

Entry = TypeVar("Entry")


class Registry(dict, Generic[Entry]):
    """Name -> entry, for entries that carry their own `name`.

    Args:
      what: what an entry is, for messages, e.g. "checkpoint format".
      base: the class every entry must be an instance of.
    """

    def __init__(self, what: str, base: type):
        super().__init__()
        self.what = what
        self.base = base

    def add(self, entry: Entry) -> Entry:
        """Registers `entry` under `entry.name`; returns it.

        Raises:
          TypeError: `entry` is not an instance of `base`.
          ValueError: its name is empty or registered already.
        """
        if not isinstance(entry, self.base):
            raise TypeError(f"expected a {self.base.__name__}, got {type(entry).__name__}")
        name = entry.name
        if not name:
            raise ValueError(f"{entry!r}: a {self.what} needs a name")
        if name in self:
            raise ValueError(f"{self.what} {name!r} is registered already ({self[name]!r})")
        self[name] = entry
        return entry

    def lookup(self, name: str) -> Entry:
        """The entry registered as `name`.

        Raises:
          ValueError: naming the unknown name and the registered ones.
        """
        if name not in self:
            raise ValueError(f"unknown {self.what} {name!r}; expected one of {tuple(self)}")
        return self[name]
