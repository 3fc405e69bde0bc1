"""Topic-pattern filtering for GET_TOPICS_OF_NAMESPACE, as Pulsar's ``TopicList.filterTopics``.

The pattern (scheme removed) must match the whole ``tenant/ns/topic`` of the partitioned topic
(``-partition-N`` removed); the answer lists the full names. Matching uses RE2, which runs in
time linear in the name whatever the pattern (a backtracking engine takes 2^n steps for
``(a+)+$`` on ``aaa...!``), and patterns are only evaluated up to
``subscription_pattern_max_length`` characters. A pattern that is too long, or that is a valid
regular expression RE2 does not support (look-around, back-references), is not evaluated: the
answer is the unfiltered list with ``filtered=false`` and the client applies its own regex, as
Pulsar does for long patterns. A pattern that is no regular expression at all is an error.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

import re2

from broker.errors import InvalidTopicsPatternError
from broker.names import without_partition_suffix

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is answered to its sender, not printed to stderr
_OPTIONS.max_mem = 1 << 20  # bounds the compiled program (e.g. nested counted repetitions)


def _strip_scheme(name: str) -> str:
    return name.split("://", 1)[1] if "://" in name else name


def compile_topics_pattern(pattern: str, max_length: int) -> Callable[[str], bool] | None:
    """A predicate on full topic names, or None when this broker does not evaluate ``pattern``."""
    if len(pattern) > max_length:
        return None
    body = _strip_scheme(pattern)
    try:
        regex = re2.compile(body, _OPTIONS)
    except re2.error:
        try:
            re.compile(body)  # only to tell "unsupported by RE2" from "not a regex"; never matched
        except (re.error, RecursionError, OverflowError, ValueError) as exc:
            raise InvalidTopicsPatternError(f"invalid topics pattern {pattern!r}: {exc}") from None
        return None
    fullmatch = regex.fullmatch
    return lambda topic: fullmatch(without_partition_suffix(_strip_scheme(topic))) is not None


def filter_topics(topics: Iterable[str], matches: Callable[[str], bool]) -> list[str]:
    return [t for t in topics if matches(t)]
