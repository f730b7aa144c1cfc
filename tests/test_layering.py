"""Imports run one way: the library imports neither its tests nor the research harness,
and the library's tests do not import the research harness (which may use them)."""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _imported_modules(path):
    """Every module name an `import` or `from ... import` in the file at `path` names."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def _imports_of(folder, forbidden, repo=REPO):
    """`path: module` for each import under `repo/folder` of a package in `forbidden`."""
    found = []
    for root, _, files in os.walk(os.path.join(repo, folder)):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                found += [f"{os.path.relpath(path, repo)}: {module}"
                          for module in _imported_modules(path)
                          if module.split(".")[0] in forbidden]
    return found


@pytest.mark.parametrize("folder, forbidden", [
    ("bert_tf", {"tests", "research"}),
    ("tests", {"research"}),
])
def test_imports_run_one_way(folder, forbidden):
    assert _imports_of(folder, forbidden) == []


def test_the_check_finds_a_forbidden_import(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import os\nimport research\nfrom research.benchmarks import machine\n")
    assert _imports_of("tests", {"research"}, repo=str(tmp_path)) == [
        "tests/test_x.py: research", "tests/test_x.py: research.benchmarks"]
