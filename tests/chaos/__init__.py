"""Reliability harness: a real cluster (or standalone) under a random fault schedule, checked.

Modules: `history` (what a run observed; self-identifying payloads), `checker` (pure: loss,
order, duplicates, lost acks, unavailability), `topology` (the processes and admin calls),
`faults` (seeded schedules and their application), `workload` (producers, consumers, drains,
cursor watcher on threads, official client and ours), `run` (one bounded run end to end).
CI runs `test_chaos_runs.py` (fixed seeds, about a minute per topology); longer runs:
``python bench/chaos.py --minutes 10 --seed 5 --cluster`` (report on stdout, JSON in
bench/results/chaos.json, history.json and process logs in the run directory).
"""
