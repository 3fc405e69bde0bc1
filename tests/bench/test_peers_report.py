"""bench/peers' table, ratios and JSON summary from made-up runs (no servers: the comparison
itself never runs in CI)."""

from __future__ import annotations

import json

from bench.peers import report
from bench.peers.run import LABELS, render_markdown


def _raw() -> dict:
    lat = [float(i) for i in range(1, 1001)]  # 1..1000 µs
    return {
        "quire-official": {
            "latency_100": [{"latencies_us": lat, "msg_per_s": 1.0}],
            "latency_1024": [{"latencies_us": lat, "msg_per_s": 1.0}],
            "produce_100": [{"msg_per_s": 100.0}, {"msg_per_s": 300.0}],
            "produce_1024": [{"msg_per_s": 50.0}],
            "consume_100": [{"msg_per_s": 1000.0}],
            "consume_1024": [{"msg_per_s": 800.0}],
        },
        "quire-clients": {
            "latency_100": [{"latencies_us": [x / 2 for x in lat], "msg_per_s": 2.0}],
            "latency_1024": [{"latencies_us": [x * 2 for x in lat], "msg_per_s": 0.5}],
            "produce_100": [{"msg_per_s": 400.0, "cpu_us_per_msg": 7.5}],
            "produce_1024": [{"msg_per_s": 100.0}],
            "consume_100": [{"msg_per_s": 1500.0}],
        },
    }


def test_summary_percentiles_medians_and_cdf() -> None:
    s = report.summarize(_raw())
    off = s["quire-official"]
    assert off["latency_1024"]["p50_us"] == 500.0 and off["latency_1024"]["p99_us"] == 990.0
    assert off["produce_100"]["msg_per_s"] == 200.0  # median of two runs
    cdf = off["latency_100"]["cdf"]
    assert len(cdf) == report.CDF_POINTS and cdf[-1] == (1000.0, 1.0)
    assert all(a[0] <= b[0] and a[1] < b[1] for a, b in zip(cdf, cdf[1:]))


def test_ratios_and_markdown_table() -> None:
    s = report.summarize(_raw())
    r = report.ratios(s, "quire-clients", "quire-official")
    assert r["produce_100"] == 2.0 and r["consume_100"] == 1.5
    assert r["latency_100_p50_us"] == 0.5 and r["latency_1024_p99_us"] == 2.0
    assert "consume_1024" not in r  # only cells both sides measured
    table = report.markdown_table(s, {k: v for k, v in LABELS.items() if k in s})
    lines = table.strip().splitlines()
    assert len(lines) == 4 and lines[0].count("|") == 6
    assert "| 500 / 990 |" in lines[2] and "200 / 50" in lines[2] and "1,000 / 800" in lines[2]
    assert "1,500 / –" in lines[3]  # a missing cell shows as a dash


def test_markdown_document_and_json_round_trip() -> None:
    s = report.summarize(_raw())
    doc = {
        "settings": {"messages": 1000, "latency_messages": 1000, "window": 1000, "repeats_quire_clients": 1,
                     "quick": True},
        "labels": {k: LABELS[k] for k in s},
        "durability": {k: "ack after x" for k in s},
        "versions": {"quire": "test"},
        "results": s,
        "ratios": {"blocking ÷ official": report.ratios(s, "quire-clients", "quire-official")},
    }
    md = render_markdown(doc)
    assert "ack after x" in md and "| produce_100 | 2.000 | higher |" in md
    assert "| client CPU µs/msg |" in md and "| – | – | 7.5 | – |" in md
    assert json.loads(json.dumps(doc))["results"]["quire-clients"]["produce_100"]["msg_per_s"] == 400.0
