"""Chaos run: a real cluster (or standalone) under a seeded random fault schedule, checked.

    python bench/chaos.py --minutes 10 --seed 7 --cluster
    python bench/chaos.py --seconds 60 --seed 1 --standalone

Prints the report (faults by kind, messages sent/acked/checked, longest unavailability) and
writes the JSON result to bench/results/chaos.json (--out to change). Exit status 1 when the
checker found a loss, an order violation, a duplicate under deduplication or a leftover process.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chaos.run import run_chaos, summary  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    length = ap.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, help="how long faults are injected")
    length.add_argument("--seconds", type=float, help="the same in seconds")
    ap.add_argument("--seed", type=int, default=1)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--cluster", action="store_const", const="cluster", dest="topology")
    mode.add_argument("--standalone", action="store_const", const="standalone", dest="topology")
    ap.add_argument("--rate", type=float, default=15.0, help="messages per second per producer")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "chaos.json")
    ap.add_argument("--dir", type=Path, help="work directory (logs, data, history.json); default a new /tmp dir")
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (args.minutes if args.minutes is not None else 1.0) * 60
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = run_chaos(args.topology or "cluster", seconds, args.seed, args.dir, args.out, args.rate)
    print(summary(result))
    print(f"JSON: {args.out}; logs and history: {result['base_dir']}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
