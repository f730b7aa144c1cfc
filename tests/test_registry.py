"""The Registry: type checks, lazily imported entries, registries of classes."""

import sys

import pytest

from bert_tf.registry import LazyEntry, Registry

_PLUGIN_MODULE = '''
class Plugin:
    def __init__(self, name):
        self.name = name


class PluginClass:
    name = "by_class"


GOOD = Plugin("good")
MISNAMED = Plugin("other")
NOT_A_PLUGIN = "good"
'''


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module `registry_plugins` on sys.path, not imported yet."""
    (tmp_path / "registry_plugins.py").write_text(_PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "registry_plugins", raising=False)
    yield "registry_plugins"
    sys.modules.pop("registry_plugins", None)


def test_a_lazy_entry_is_imported_when_first_looked_up(plugin_module):
    registry = Registry("plugin", f"{plugin_module}.Plugin")
    registry.add_lazy("good", f"{plugin_module}.GOOD")
    assert plugin_module not in sys.modules
    assert registry["good"] == LazyEntry(f"{plugin_module}.GOOD")
    assert list(registry) == ["good"]
    entry = registry.lookup("good")
    assert entry is sys.modules[plugin_module].GOOD
    assert registry["good"] is entry and registry.lookup("good") is entry


def test_a_lazy_entry_is_checked_when_imported(plugin_module):
    registry = Registry("plugin", f"{plugin_module}.Plugin")
    registry.add_lazy("good", f"{plugin_module}.MISNAMED")
    registry.add_lazy("bad", f"{plugin_module}.NOT_A_PLUGIN")
    with pytest.raises(ValueError, match="registered as plugin 'good' but is named 'other'"):
        registry.lookup("good")
    with pytest.raises(TypeError, match="expected a Plugin, got str"):
        registry.lookup("bad")
    with pytest.raises(ValueError, match="plugin 'good' is registered already"):
        registry.add_lazy("good", f"{plugin_module}.GOOD")
    with pytest.raises(ValueError, match=r"unknown plugin 'nope'; expected one of \('good', "
                                         r"'bad'\)"):
        registry.lookup("nope")


def test_a_registry_of_classes_checks_and_validates(plugin_module):
    seen = []
    registry = Registry("plugin class", f"{plugin_module}.PluginClass", classes=True,
                        validate=seen.append)
    module = __import__(plugin_module)
    subclass = type("Sub", (module.PluginClass,), {"name": "sub"})
    assert registry.add(subclass) is subclass and seen == [subclass]
    with pytest.raises(TypeError, match=f"subclass of {plugin_module}.PluginClass"):
        registry.add(module.PluginClass())
    with pytest.raises(ValueError, match="plugin class 'sub' is registered already"):
        registry.add(subclass)

    copy = registry.copy()
    copy.add(module.PluginClass)
    assert isinstance(copy, Registry) and copy.classes and copy.validate is registry.validate
    assert list(copy) == ["sub", "by_class"] and list(registry) == ["sub"]
