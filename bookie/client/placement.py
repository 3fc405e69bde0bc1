"""Ensemble placement: which writable bookies a new ledger (or a replacement) goes to.

The default is BookKeeper's ``DefaultEnsemblePlacementPolicy``: a random shuffle of the
writable bookies minus the excluded ones. Quarantined (recently failed) bookies are used only
when there are not enough others. A policy is pluggable: any object with the two methods of
:class:`EnsemblePlacementPolicy`, named in ``ClientConfig.ensemble_placement_policy`` as
``"module:Class"``.
"""

from __future__ import annotations

import importlib
import random
from typing import Protocol, Sequence

from bookie.client.errors import BKNotEnoughBookiesError

__all__ = ["EnsemblePlacementPolicy", "RandomPlacementPolicy", "load_policy"]


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

    def new_ensemble(
        self, ensemble_size: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> list[str]:
        good, fallback = self._candidates(writable, exclude, quarantined)
        chosen = (good + fallback)[:ensemble_size]
        if len(chosen) < ensemble_size:
            raise BKNotEnoughBookiesError(
                f"need {ensemble_size} writable bookies, have {len(chosen)} ({sorted(writable)}; excluded "
                f"{sorted(exclude)}){_WHY}"
            )
        return chosen

    def replace_bookie(
        self, ensemble: Sequence[str], index: int, writable: Sequence[str], exclude: set[str], quarantined: set[str]
    ) -> str:
        good, fallback = self._candidates(writable, exclude | set(ensemble), quarantined)
        pool = good or fallback
        if not pool:
            raise BKNotEnoughBookiesError(
                f"no writable bookie to replace {ensemble[index]} (ensemble {list(ensemble)}, writable "
                f"{sorted(writable)}){_WHY}"
            )
        return pool[0]


def load_policy(spec: str) -> EnsemblePlacementPolicy:
    """``"random"`` or ``"package.module:ClassName"`` (constructed without arguments)."""
    if spec == "random":
        return RandomPlacementPolicy()
    module, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"placement policy {spec!r} is neither 'random' nor 'module:Class'")
    return getattr(importlib.import_module(module), attr)()
