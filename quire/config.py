"""One configuration loader for every process: bookie, broker, managed ledger, ledger client.

Each component's settings are a dataclass whose field names are BookKeeper/Pulsar's keys in
snake_case, with their defaults. ``load_config(cls, path, table=..., **overrides)`` reads an
optional TOML file (the keys of ``[table]``, or the top level when the file has no such table;
other tables belong to other components), applies the overrides (CLI flags; ``None`` = not
given) and builds the dataclass. Every failure is one ``ConfigError`` with a message a person
can act on: the file and line of a TOML syntax error, the unknown key with the spelling meant
(``journalMaxGroupWaitMs`` -> ``journal_max_group_wait_ms``, close misspellings), the key whose
value has the wrong type.

This module is a leaf (standard library only), so every package may import it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import errno
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Iterator, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file, key and fix."""


class PortInUseError(ConfigError):
    """A listening port another process holds; ``key`` is the config key that chose it."""

    def __init__(self, key: str, host: str, port: int) -> None:
        super().__init__(f"port {port} on {host} ({key}) is already in use by another process")
        self.key, self.host, self.port = key, host, port


@contextlib.contextmanager
def naming_the_port(key: str, host: str, port: int) -> Iterator[None]:
    """Turn EADDRINUSE from binding ``host:port`` (also inside exception groups) into PortInUseError."""
    try:
        yield
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(key, host, port) from None
        raise
    except BaseExceptionGroup as group:
        if any(isinstance(e, OSError) and e.errno == errno.EADDRINUSE for e in exception_leaves(group)):
            raise PortInUseError(key, host, port) from None
        raise


def exception_leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, depth first (trio wraps errors raised in
    nurseries in groups)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from exception_leaves(inner)
    else:
        yield exc


def snake_case(name: str) -> str:
    """Pulsar/BookKeeper's camelCase key -> ours: ``journalMaxGroupWaitMs`` -> ``journal_max_group_wait_ms``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", lambda m: "_" + (m.group(1) or m.group(2)), name).lower()


def suggest(key: str, known: typing.Iterable[str]) -> str:
    """' (did you mean x?)' for an unknown key, or ''."""
    names = list(known)
    snake = snake_case(key)
    if snake != key and snake in names:
        return f" (did you mean {snake}? keys are snake_case here)"
    close = difflib.get_close_matches(snake, names, n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


def read_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        # "path:line:column: ..." as compilers write it, so editors jump to the spot.
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        where = f"{path}:{m.group(1)}:{m.group(2)}" if m else str(path)
        message = re.sub(r" \(at line.*", "", str(e))
        raise ConfigError(f"{where}: not valid TOML: {message}") from None


def table_of(doc: dict[str, Any], table: str) -> dict[str, Any]:
    """The ``[table]`` section, else the top-level keys (other tables are other components')."""
    section = doc.get(table)
    if isinstance(section, dict):
        return dict(section)
    return {k: v for k, v in doc.items() if not isinstance(v, dict)}


def build(cls: type[T], values: dict[str, Any], *, what: str, source: str = "") -> T:
    """``cls(**values)`` with unknown keys and wrongly typed values as ConfigError."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    where = f"{source}: " if source else ""
    for key in values:
        if key not in fields:
            raise ConfigError(f"{where}unknown {what} config key {key!r}{suggest(key, fields)}")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if not _fits(value, hints.get(key, Any)):
            raise ConfigError(f"{where}{what} config key {key!r} = {value!r}: expected {_type_name(hints[key])}")
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}{what} configuration: {e}") from None


def load_config(cls: type[T], path: str | Path | None = None, *, table: str, what: str | None = None,
                **overrides: Any) -> T:
    """A ``cls`` from the ``[table]`` of a TOML file (optional) plus overrides (None = unset)."""
    values: dict[str, Any] = {}
    if path is not None:
        values.update(table_of(read_toml(path), table))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return build(cls, values, what=what or table, source=str(path) if path is not None else "")


def parse_sets(cls: type[Any], items: typing.Iterable[str], *, what: str) -> dict[str, Any]:
    """``--set key=value`` command-line items -> overrides for ``cls``, each value read as the type
    of its field's default (bool: 1/true/yes/on; list: comma-separated); ConfigError otherwise."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        if key not in fields:
            raise ConfigError(f"unknown {what} config key {key!r} in --set{suggest(key, fields)}")
        try:
            out[key] = _from_text(fields[key], raw)
        except ValueError:
            raise ConfigError(f"{what} config key {key!r} = {raw!r} in --set: expected {fields[key].type}") from None
    return out


def _from_text(field: dataclasses.Field[Any], raw: str) -> Any:
    default = field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
    if isinstance(default, bool):
        return raw.lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    if isinstance(default, list):
        return [p for p in raw.split(",") if p]
    return raw


def _fits(value: Any, hint: Any) -> bool:
    """A light check of TOML scalars/lists against a field's annotation (ints fit floats)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin in (list, tuple, set):
        return isinstance(value, (list, tuple, set))
    if origin is dict:
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint) or (hint is bytes and isinstance(value, str))
    return True


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
