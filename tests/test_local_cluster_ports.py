"""``quire cluster up`` picks every port of its processes before they bind them: never one twice."""

from __future__ import annotations

from typing import Any

import pytest

from quire import local_cluster


class _ProbeSocket:
    """A probe socket the kernel hands the same port as the probe before (it may, once closed)."""

    given: Any = None  # the ports the kernel gives, in order (set by the test)

    def __enter__(self) -> "_ProbeSocket":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def bind(self, _addr: Any) -> None:
        self.port = next(self.given)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_ports_handed_out_are_never_handed_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_cluster, "_handed_out", set())
    monkeypatch.setattr(_ProbeSocket, "given", iter([41001, 41001, 41002, 41001, 41002, 41003]))
    monkeypatch.setattr(local_cluster.socket, "socket", _ProbeSocket)
    assert local_cluster.ports(0, 2) == [41001, 41002]  # two brokers: not 41001 twice
    assert local_cluster.ports(0, 1) == [41003]  # later calls skip both too
    assert local_cluster.ports(7000, 2) == [7000, 7001]  # ports the user chose are theirs
