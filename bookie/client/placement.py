"""Ensemble placement: which writable bookies a new ledger (or a replacement) goes to.

``"random"`` is BookKeeper's ``DefaultEnsemblePlacementPolicy``: a random shuffle of the
writable bookies minus the excluded ones. ``"rackaware"`` (the default, as BookKeeper's client
default ``RackawareEnsemblePlacementPolicy``) in its simplest form: bookies declare a rack
(``/bookies/<id>/rack``, written by ``quire bookie --rack``; undeclared = ``/default-rack``);
a new ensemble takes its bookies round-robin over the racks, so consecutive ensemble positions
(a write set) sit in different racks while there are racks enough, and a replacement prefers a
rack no other member of the ensemble uses. With one rack it is the random policy.
Quarantined (recently failed) bookies are used only when there are not enough others. A
policy is pluggable: any object with the two methods of :class:`EnsemblePlacementPolicy`, named
in ``ClientConfig.ensemble_placement_policy`` as ``"module:Class"``; one with a ``racks``
attribute (a dict) gets it refreshed from the metadata store before each placement.
"""

from __future__ import annotations

import importlib
import random
from collections import Counter
from typing import Protocol, Sequence

from bookie.client.errors import BKNotEnoughBookiesError

__all__ = ["EnsemblePlacementPolicy", "RandomPlacementPolicy", "RackAwarePlacementPolicy", "DEFAULT_RACK",
           "load_policy"]

DEFAULT_RACK = "/default-rack"  # BookKeeper's NetworkTopology.DEFAULT_RACK


# Said with every "not enough bookies" error: the usual causes, so an operator knows where to look.
_WHY = ": bookies are down or read-only (a full disk turns a bookie read-only; see its /api/v1/bookie/state)"

class EnsemblePlacementPolicy(Protocol):
    def new_ensemble(
        self, ensemble_size: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> list[str]:
        """E distinct bookies from ``writable`` not in ``exclude`` (BKNotEnoughBookiesError)."""

    def replace_bookie(
        self, ensemble: Sequence[str], index: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> str:
        """A bookie to take ``ensemble[index]``'s place, not already in the ensemble."""


class RandomPlacementPolicy:
    """Random choice, preferring bookies that are not quarantined."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def _candidates(self, writable: Sequence[str], exclude: set[str], quarantined: set[str]) -> tuple[list[str], list[str]]:
        good = [b for b in writable if b not in exclude and b not in quarantined]
        fallback = [b for b in writable if b not in exclude and b in quarantined]
        self._rng.shuffle(good)
        self._rng.shuffle(fallback)
        return good, fallback

    @staticmethod
    def _enough(chosen: list[str], ensemble_size: int, writable: Sequence[str], exclude: set[str]) -> list[str]:
        if len(chosen) < ensemble_size:
            raise BKNotEnoughBookiesError(
                f"need {ensemble_size} writable bookies, have {len(chosen)} ({sorted(writable)}; excluded "
                f"{sorted(exclude)}){_WHY}"
            )
        return chosen

    def _replacements(
        self, ensemble: Sequence[str], index: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> list[str]:
        """Candidates for ``ensemble[index]``'s place, healthy ones if any (shuffled)."""
        good, fallback = self._candidates(writable, exclude | set(ensemble), quarantined)
        pool = good or fallback
        if not pool:
            raise BKNotEnoughBookiesError(
                f"no writable bookie to replace {ensemble[index]} (ensemble {list(ensemble)}, writable "
                f"{sorted(writable)}){_WHY}"
            )
        return pool

    def new_ensemble(
        self, ensemble_size: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> list[str]:
        good, fallback = self._candidates(writable, exclude, quarantined)
        return self._enough((good + fallback)[:ensemble_size], ensemble_size, writable, exclude)

    def replace_bookie(
        self, ensemble: Sequence[str], index: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> str:
        return self._replacements(ensemble, index, writable, exclude, quarantined)[0]


class RackAwarePlacementPolicy(RandomPlacementPolicy):
    """Spread an ensemble over racks; ``racks`` (bookie id -> rack) is refreshed by the client."""

    def __init__(self, rng: random.Random | None = None, racks: dict[str, str] | None = None) -> None:
        super().__init__(rng)
        self.racks: dict[str, str] = dict(racks or {})

    def rack(self, bookie: str) -> str:
        return self.racks.get(bookie) or DEFAULT_RACK

    def _round_robin(self, pool: list[str], taken: Sequence[str]) -> list[str]:
        """``pool`` reordered: one bookie per rack in turn, racks ``taken`` uses least first."""
        by_rack: dict[str, list[str]] = {}
        for b in pool:  # pool is shuffled: the order inside a rack is random
            by_rack.setdefault(self.rack(b), []).append(b)
        used = Counter(self.rack(b) for b in taken)
        racks = list(by_rack)
        self._rng.shuffle(racks)
        racks.sort(key=lambda r: used[r])  # stable: the shuffle breaks ties
        out: list[str] = []
        while any(by_rack.values()):
            for r in racks:
                if by_rack[r]:
                    out.append(by_rack[r].pop(0))
        return out

    def new_ensemble(
        self, ensemble_size: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> list[str]:
        good, fallback = self._candidates(writable, exclude, quarantined)
        chosen = self._round_robin(good, [])[:ensemble_size]
        if len(chosen) < ensemble_size:
            chosen += self._round_robin(fallback, chosen)[: ensemble_size - len(chosen)]
        return self._enough(chosen, ensemble_size, writable, exclude)

    def replace_bookie(
        self, ensemble: Sequence[str], index: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> str:
        pool = self._replacements(ensemble, index, writable, exclude, quarantined)
        others = Counter(self.rack(b) for i, b in enumerate(ensemble) if i != index)
        return min(pool, key=lambda b: others[self.rack(b)])  # first of the least shared rack


def load_policy(spec: str) -> EnsemblePlacementPolicy:
    """``"random"``, ``"rackaware"`` or ``"package.module:ClassName"`` (constructed without arguments)."""
    if spec == "random":
        return RandomPlacementPolicy()
    if spec == "rackaware":
        return RackAwarePlacementPolicy()
    module, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"placement policy {spec!r} is neither 'random' nor 'module:Class'")
    return getattr(importlib.import_module(module), attr)()
