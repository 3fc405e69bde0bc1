"""Pure helpers: path validation, msgpack values and store URL parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata import parse_url
from metadata.errors import InvalidPathError, MetadataError, ValueTooLargeError
from metadata.paths import ancestors, check_value, parent_of, validate_create_path, validate_path
from metadata.values import ValueDecodeError, pack, unpack

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(values)
def test_pack_round_trip(obj: object) -> None:
    assert unpack(pack(obj)) == obj


@pytest.mark.parametrize("garbage", [b"\xc1", b"\x92\x01", b"\x01\x02"])
def test_unpack_garbage(garbage: bytes) -> None:
    with pytest.raises(ValueDecodeError):
        unpack(garbage)


def test_paths() -> None:
    for good in ["/", "/a", "/a/b-c_d.e", "/ledgers/00/0000/L0001", "/ünï/cödé", "/a/..b"]:
        assert validate_path(good) == good
    assert validate_create_path("/seq/", sequential=True) == "/seq/"
    with pytest.raises(InvalidPathError):
        validate_create_path("/seq/", sequential=False)
    assert parent_of("/a/b") == "/a" and parent_of("/a") == "/"
    assert ancestors("/a/b/c") == ["/a", "/a/b"]


def test_values() -> None:
    assert check_value(bytearray(b"ab")) == b"ab"
    with pytest.raises(ValueTooLargeError):
        check_value(b"xx", limit=1)
    with pytest.raises(TypeError):
        check_value("text")


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("zk://127.0.0.1:2181", ("zk", "127.0.0.1:2181", "")),
        ("zk://h1:2181,h2:2182/quire/cluster", ("zk", "h1:2181,h2:2182", "/quire/cluster")),
        ("zk://h:1/", ("zk", "h:1", "")),
        ("rocksdb:///var/lib/quire/meta", ("rocksdb", "", "/var/lib/quire/meta")),
        ("memory://unit", ("memory", "unit", "")),
        ("memory://", ("memory", "", "")),
    ],
)
def test_parse_url(url: str, parsed: tuple[str, str, str]) -> None:
    assert parse_url(url) == parsed


@pytest.mark.parametrize("url", ["127.0.0.1:2181", "zk:///chroot", "rocksdb://host/path", "rocksdb://", "etcd://x"])
def test_parse_bad_url(url: str) -> None:
    with pytest.raises(MetadataError):
        parse_url(url)
