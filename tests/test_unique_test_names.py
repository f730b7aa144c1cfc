"""pytest imports test modules by basename (rootdir-relative, no packages): two files
with one name in different folders stop the whole collection in a clean checkout."""

import collections
import pathlib


def test_every_test_module_has_a_unique_basename():
    tests = pathlib.Path(__file__).parent
    names = collections.Counter(path.name for path in tests.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
