"""Writes ``pulsar_api_pb2.pyi``, the type stub of the generated protobuf module, from its descriptors.

``pulsar_api_pb2.py`` builds its classes at import time, so a type checker sees none of them;
``protoc --pyi_out`` would write a stub but the project does not install protoc. This reads the
same descriptors the runtime uses and writes one: every message with its typed fields and keyword
constructor, every enum as an int class with its values (nested enums' values also on their
message, as the runtime has them). The stub's own ``_Message`` base lists the protobuf methods
the code uses and nothing else, so a misspelt field or method fails the type check (subclassing
google.protobuf's untyped ``Message`` would make every attribute ``Any``).

    PYTHONPATH=. python scripts/gen_pulsar_api_stub.py   # after regenerating the module

``tests/protocol/test_stub.py`` fails when the checked-in stub differs from what this writes.
"""

from __future__ import annotations

import keyword
import sys
from pathlib import Path

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from clients.protocol import pulsar_api_pb2

STUB = Path(pulsar_api_pb2.__file__).with_name("pulsar_api_pb2.pyi")

_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "float", FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_BOOL: "bool", FieldDescriptor.TYPE_STRING: "str", FieldDescriptor.TYPE_BYTES: "bytes",
}

_HEAD = '''"""Type stub of pulsar_api_pb2 (written by scripts/gen_pulsar_api_stub.py from its descriptors; do not edit)."""

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Generic, TypeVar, overload

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FileDescriptor

import clients.protocol.pulsar_api_pb2 as _pb  # message types by module: an enum value may shadow a class name

_T = TypeVar("_T")
_M = TypeVar("_M", bound="_Message")

DESCRIPTOR: FileDescriptor

class _Message:
    DESCRIPTOR: ClassVar[Descriptor]
    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...
    def ParseFromString(self, serialized: bytes | bytearray | memoryview) -> int: ...
    def MergeFromString(self, serialized: bytes | bytearray | memoryview) -> int: ...
    def CopyFrom(self, other_msg: Any) -> None: ...
    def MergeFrom(self, other_msg: Any) -> None: ...
    def Clear(self) -> None: ...
    def ClearField(self, field_name: str) -> None: ...
    def HasField(self, field_name: str) -> bool: ...
    def SetInParent(self) -> None: ...
    def IsInitialized(self) -> bool: ...
    def FindInitializationErrors(self) -> list[str]: ...
    def ByteSize(self) -> int: ...
    def ListFields(self) -> list[tuple[Any, Any]]: ...

class _Enum(int):
    DESCRIPTOR: ClassVar[EnumDescriptor]
    @classmethod
    def Name(cls, number: int) -> str: ...
    @classmethod
    def Value(cls, name: str) -> int: ...
    @classmethod
    def keys(cls) -> list[str]: ...
    @classmethod
    def values(cls) -> list[int]: ...
    @classmethod
    def items(cls) -> list[tuple[str, int]]: ...

class _Repeated(Generic[_T]):
    def __iter__(self) -> Iterator[_T]: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, key: int) -> _T: ...
    @overload
    def __getitem__(self, key: slice) -> list[_T]: ...
    def __delitem__(self, key: int | slice) -> None: ...
    def __bool__(self) -> bool: ...
    def remove(self, elem: _T) -> None: ...
    def pop(self, key: int = ...) -> _T: ...

class _RepeatedScalar(_Repeated[_T]):
    def append(self, value: _T) -> None: ...
    def extend(self, values: Iterable[_T]) -> None: ...
    def insert(self, key: int, value: _T) -> None: ...
    def __setitem__(self, key: int, value: _T) -> None: ...

class _RepeatedMessage(_Repeated[_M]):
    def add(self, **kwargs: Any) -> _M: ...
    def append(self, value: _M) -> None: ...
    def extend(self, values: Iterable[_M]) -> None: ...
'''


def _names(enum: EnumDescriptor) -> list[str]:
    # A value named like a keyword (Schema.Type.None) exists only through getattr/Value().
    return [v.name for v in enum.values if not keyword.iskeyword(v.name)]


def _enum(enum: EnumDescriptor, indent: str) -> list[str]:
    lines = [f"{indent}class {enum.name}(_Enum):"]
    lines += [f"{indent}    {name}: ClassVar[int]" for name in _names(enum)]
    return lines


def _field_type(field: FieldDescriptor) -> tuple[str, str]:
    """(attribute type, constructor argument type) of a field."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        base = f"_pb.{field.message_type.name}"
    elif field.type in _SCALARS:
        base = _SCALARS[field.type]
    else:  # every integer type and enums (the runtime stores enum fields as plain ints)
        base = "int"
    if field.is_repeated:
        container = "_RepeatedMessage" if field.type == FieldDescriptor.TYPE_MESSAGE else "_RepeatedScalar"
        return f"{container}[{base}]", f"Iterable[{base}] | None"
    return base, f"{base} | None"


def _message(msg: Descriptor) -> list[str]:
    lines = [f"class {msg.name}(_Message):"]
    for enum in msg.enum_types:
        lines += _enum(enum, "    ")
        lines += [f"    {name}: ClassVar[int]" for name in _names(enum)]
    for field in msg.fields:
        lines.append(f"    {field.name.upper()}_FIELD_NUMBER: ClassVar[int]")
    for field in msg.fields:
        lines.append(f"    {field.name}: {_field_type(field)[0]}")
    if msg.fields:
        args = ", ".join(f"{f.name}: {_field_type(f)[1]} = ..." for f in msg.fields)
        lines.append(f"    def __init__(self, *, {args}) -> None: ...")
    else:
        lines.append("    def __init__(self) -> None: ...")
    return lines


def render() -> str:
    fd = pulsar_api_pb2.DESCRIPTOR
    out = [_HEAD]
    for enum in fd.enum_types_by_name.values():
        out.append("\n".join(_enum(enum, "")))
        out.append("\n".join(f"{name}: int" for name in _names(enum)))
    for msg in fd.message_types_by_name.values():
        out.append("\n".join(_message(msg)))
    return "\n\n".join(out) + "\n"


def main() -> None:
    STUB.write_text(render())
    print(f"wrote {STUB}", file=sys.stderr)


if __name__ == "__main__":
    main()
