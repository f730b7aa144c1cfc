"""Typed dataclass configs: strict YAML loading and `a.b=c` overrides.

Every experiment is one YAML file mapped onto nested dataclasses. Loading is
strict: an unknown key, or a value of the wrong type, is an error naming the
dotted key and the file. YAML is read with `yaml.safe_load` (no code runs).
"""

import dataclasses
import difflib
import types
import typing

import yaml

from bert_tf import storage


class ConfigError(ValueError):
    """A config file or override does not fit the config's schema."""


# {config class: {key it no longer has: (the key that replaced it, what to set)}}.
_RETIRED_KEYS: dict[type, dict[str, tuple[str, str]]] = {}


def retired_keys(replacements: dict[str, tuple[str, str]]):
    """Class decorator: loading one of `replacements`' keys is an error naming its successor.

    A renamed option then fails with one line saying what to write instead,
    rather than as an unknown key (or, worse, a silently changed meaning).

    Args:
      replacements: `{old key: (new key, what to set it to)}`, keys relative to
        the class's section (e.g. `"packing"` in the data section).
    """
    def register(cls):
        _RETIRED_KEYS.setdefault(cls, {}).update(replacements)
        return cls
    return register


# Rewrites of a config mapping that an earlier version recorded (a run's params.yaml)
# into today's keys, each keeping what the old keys meant (`upgrade_recorded`).
_RECORDED_UPGRADES: list = []


def recorded_upgrade(function):
    """Registers `function(values) -> values`, applied to configs the library recorded.

    A user's own config with a retired key gets the one-line error of
    `retired_keys`; a run directory written by an earlier version must still
    resume, evaluate and export, so its `params.yaml` is read through these.

    Args:
      function: takes and returns a plain config mapping (it must not change its input).
    """
    _RECORDED_UPGRADES.append(function)
    return function


def upgrade_recorded(values):
    """`values` (a recorded config mapping) with every registered upgrade applied."""
    for upgrade in _RECORDED_UPGRADES:
        values = upgrade(values)
    return values


def _retired_key_error(cls, key, prefix, source):
    """The ConfigError for a retired `key` of `cls` (subclasses inherit it), or None."""
    for klass in cls.__mro__:
        if key in _RETIRED_KEYS.get(klass, {}):
            new_key, advice = _RETIRED_KEYS[klass][key]
            return ConfigError(f"{source}: {prefix}{key} is no longer a key: set "
                               f"{prefix}{new_key} instead ({advice})")
    return None


def nearest(name: str, choices, prefix: str = "", count: int = 3) -> str:
    """`"; did you mean 'a' or 'b'?"` for the choices closest to `name`, else "".

    Args:
      name: what the user wrote (one key, or a preset name).
      choices: the valid names in the same place.
      prefix: written before each suggestion (the dotted path of the keys' section).
      count: at most this many suggestions.
    """
    close = difflib.get_close_matches(name, list(choices), n=count, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(prefix + choice) for choice in close) + "?"


def _field_types(cls):
    return typing.get_type_hints(cls)


def _optional_inner(annotation):
    """`T` for `Optional[T]` (or `T | None`), else None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0]
    return None


def _convert(value, annotation, key, source):
    """`value` checked (and minimally widened) against `annotation`."""
    inner = _optional_inner(annotation)
    if inner is not None:
        return None if value is None else _convert(value, inner, key, source)
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {key} must be a mapping, got {type(value).__name__}")
        return from_dict(annotation, value, source, prefix=f"{key}.")
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(
                f"{source}: {key} must be a list, got {type(value).__name__} {value!r}")
        (item_type, *_) = typing.get_args(annotation) or (typing.Any,)
        items = [_convert(v, item_type, f"{key}[{i}]", source) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if annotation is typing.Any:
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # YAML reads "1" as an int; a float field accepts it
    if annotation is float and isinstance(value, str):
        # PyYAML (YAML 1.1) reads exponents without a dot, e.g. 1e-4, as strings.
        try:
            return float(value)
        except ValueError:
            pass
    if annotation is int and isinstance(value, bool) or not isinstance(value, annotation):
        raise ConfigError(
            f"{source}: {key} must be {annotation.__name__}, got "
            f"{type(value).__name__} {value!r}")
    return value


def from_dict(cls, values, source="config", prefix=""):
    """Builds dataclass `cls` from a dict, strictly (unknown keys are errors)."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: expected a mapping at {prefix or 'top level'}, "
                          f"got {type(values).__name__}")
    hints = _field_types(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    for key in unknown:
        error = _retired_key_error(cls, key, prefix, source)
        if error is not None:
            raise error
    if unknown:
        hint = nearest(unknown[0], names) if len(unknown) == 1 else ""
        raise ConfigError(
            f"{source}: unknown key(s) {[prefix + k for k in unknown]}{hint}; "
            f"expected keys of {cls.__name__}: {names}")
    converted = {name: _convert(value, hints[name], prefix + name, source)
                 for name, value in values.items()}
    try:
        return cls(**converted)
    except (TypeError, ValueError) as e:
        where = prefix or "top level"
        raise ConfigError(f"{source}: invalid {cls.__name__} at {where}: {e}") from e


def to_dict(config):
    """Plain dict (tuples as lists) of a dataclass config, for YAML."""
    def plain(value):
        if dataclasses.is_dataclass(value):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value
    return plain(config)


def _parse_override(override, source):
    """`(key parts, value)` of one `a.b=value` override, its value parsed as YAML."""
    if "=" not in override:
        raise ConfigError(f"{source}: override {override!r} must look like key.path=value")
    key, raw = override.split("=", 1)
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"{source}: the value of override {override!r} is not valid YAML "
                          f"({reason})") from None
    return key.strip().split("."), value


def apply_overrides(config, overrides, source="--set"):
    """A copy of `config` with `a.b=value` overrides applied (values parsed as YAML)."""
    values = to_dict(config)
    for override in overrides:
        parts, value = _parse_override(override, source)
        node = values
        # The config object at the depth of `node`: its class knows the retired keys.
        config_node = config
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                section = "".join(f"{name}." for name in parts[:depth])
                error = (_retired_key_error(type(config_node), part, section, source)
                         if dataclasses.is_dataclass(config_node) else None)
                if error is not None:
                    raise error
                hint = nearest(part, node, section) if isinstance(node, dict) else ""
                raise ConfigError(
                    f"{source}: unknown key {'.'.join(parts[:depth + 1])!r} in override "
                    f"{override!r}{hint}")
            if depth == len(parts) - 1:
                node[part] = value
            else:
                node = node[part]
                config_node = getattr(config_node, part, None)
    return from_dict(type(config), values, source)


def override_keys(overrides, source="--set") -> frozenset[str]:
    """The dotted keys that `overrides` set, parsed as `apply_overrides` parses them.

    A mapping value sets its own key and every key under it:
    `trainer={train_steps: 3}` sets `trainer` and `trainer.train_steps`.

    Args:
      overrides: `a.b=value` strings.
      source: named in errors.
    """
    keys = set()

    def add(key, value):
        keys.add(key)
        if isinstance(value, dict):
            for name, inner in value.items():
                add(f"{key}.{name}", inner)

    for override in overrides:
        parts, value = _parse_override(override, source)
        add(".".join(parts), value)
    return frozenset(keys)


def load_yaml(path):
    """A YAML file's top-level mapping, read with the safe loader."""
    try:
        with storage.open(path, encoding="utf-8") as f:
            values = yaml.safe_load(f)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"config file not found: {path}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({e})") from e
    return {} if values is None else values


def load_config(cls, path=None, overrides=(), recorded=False):
    """`cls` from a YAML file (defaults when `path` is None) plus overrides.

    `recorded`: the file is one the library wrote (a run's params.yaml), read
    through `upgrade_recorded`.
    """
    values = load_yaml(path) if path else {}
    if recorded:
        values = upgrade_recorded(values)
    config = from_dict(cls, values, source=path or "defaults")
    return apply_overrides(config, overrides) if overrides else config


def dump_config(config, path):
    """Writes the resolved config as YAML (e.g. `model_dir/params.yaml`)."""
    with storage.open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(to_dict(config), f, sort_keys=False)
