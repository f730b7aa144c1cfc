"""pytest imports test modules by basename (rootdir-relative, no packages): two files
with one name in different folders stop the whole collection in a clean checkout."""

import collections
import pathlib


def test_every_test_module_has_a_unique_basename():
    repo = pathlib.Path(__file__).parent.parent
    paths = [path for folder in (repo / "tests", repo / "research" / "tests")
             for path in folder.rglob("test_*.py")]
    names = collections.Counter(path.name for path in paths)
    assert [name for name, count in names.items() if count > 1] == []
