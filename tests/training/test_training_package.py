"""The training package keeps one job per module: short functions, a trainer module of
bounded size, and a package docstring that names every module with its job."""

import ast
import os
import re

import bert_tf.training

PACKAGE = os.path.dirname(bert_tf.training.__file__)
MAX_FUNCTION_LINES = 50
MAX_TRAINER_LINES = 500


def function_lengths(path):
    """`{qualified name: lines}` of every function in the file at `path`, nested ones too.

    A function's lines run from its first decorator to its last line.
    """
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    lengths = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            name = f"{prefix}{getattr(child, 'name', '')}"
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                lengths[name] = child.end_lineno - first + 1
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{name}.")
    visit(tree, "")
    return lengths


def modules():
    return sorted(name for name in os.listdir(PACKAGE) if name.endswith(".py"))


def test_the_measure_counts_from_the_first_decorator_to_the_last_line(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text("import functools\n\n\n"
                    "class Box:\n"
                    "    @staticmethod\n"
                    "    @functools.cache\n"
                    "    def opened():\n"
                    "        def inner():\n"
                    "            return 1\n"
                    "        return inner()\n")
    assert function_lengths(path) == {"Box.opened": 6, "Box.opened.inner": 2}


def test_no_function_of_the_training_package_is_longer_than_50_lines():
    too_long = [f"{module}: {name} has {lines} lines"
                for module in modules()
                for name, lines in function_lengths(os.path.join(PACKAGE, module)).items()
                if lines > MAX_FUNCTION_LINES]
    assert too_long == []


def test_the_trainer_module_stays_short():
    with open(os.path.join(PACKAGE, "trainer.py"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) <= MAX_TRAINER_LINES


def test_the_package_docstring_gives_every_module_one_line():
    listed = re.findall(r"^    (\w+\.py) +\S", bert_tf.training.__doc__, flags=re.MULTILINE)
    assert sorted(listed) == [name for name in modules() if name != "__init__.py"]
