"""Summaries, the Markdown table, the JSON document and the latency CDF plots of the peer
comparison. Pure functions of the measured runs (matplotlib is imported only to plot)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

SIZES = (100, 1024)
CDF_POINTS = 200


def size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[idx]


def cdf(latencies_us: list[float], points: int = CDF_POINTS) -> list[tuple[float, float]]:
    """(latency µs, fraction at or below) at ``points`` evenly spaced fractions, plus the max."""
    data = sorted(latencies_us)
    if not data:
        return []
    out = [(round(percentile(data, 100 * (i + 1) / points), 1), round((i + 1) / points, 4)) for i in range(points)]
    return out


def _cpu(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Median client CPU µs per message, where the worker measured it."""
    values = [r["cpu_us_per_msg"] for r in runs if "cpu_us_per_msg" in r]
    return {"cpu_us_per_msg": round(statistics.median(values), 1)} if values else {}


def summarize_latency(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over runs of each run's p50/p99/mean, and the CDF of the first run."""
    stats = []
    for run in runs:
        data = sorted(run["latencies_us"])
        stats.append((percentile(data, 50), percentile(data, 99), statistics.fmean(data) if data else 0.0))
    return {
        "p50_us": round(statistics.median(s[0] for s in stats), 1),
        "p99_us": round(statistics.median(s[1] for s in stats), 1),
        "mean_us": round(statistics.median(s[2] for s in stats), 1),
        "runs": len(runs),
        "per_run_p50_us": [round(s[0], 1) for s in stats],
        "per_run_p99_us": [round(s[1], 1) for s in stats],
        "cdf": cdf(runs[0]["latencies_us"]) if runs else [],
        **_cpu(runs),
    }


def summarize_rate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["msg_per_s"] for r in runs]
    return {"msg_per_s": round(statistics.median(rates), 1), "runs": len(runs), "per_run_msg_per_s": rates,
            **_cpu(runs)}


def summarize(raw: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """``raw[system][f"{workload}_{size}"]`` = list of worker results -> one summary per cell."""
    out: dict[str, dict[str, Any]] = {}
    for system, cells in raw.items():
        out[system] = {}
        for key, runs in cells.items():
            if not runs:
                continue
            out[system][key] = summarize_latency(runs) if key.startswith("latency") else summarize_rate(runs)
    return out


def ratios(summary: dict[str, dict[str, Any]], num: str, den: str) -> dict[str, float]:
    """``num / den`` per cell: msg/s ratios (higher is better) and latency ratios (lower is better)."""
    out: dict[str, float] = {}
    a, b = summary.get(num, {}), summary.get(den, {})
    for key in sorted(set(a) & set(b)):
        if key.startswith("latency"):
            for p in ("p50_us", "p99_us"):
                if b[key][p]:
                    out[f"{key}_{p}"] = round(a[key][p] / b[key][p], 3)
        elif b[key]["msg_per_s"]:
            out[key] = round(a[key]["msg_per_s"] / b[key]["msg_per_s"], 3)
    return out


def _fmt_int(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _cell(summary: dict[str, Any], key: str, field: str) -> float | None:
    cell = summary.get(key)
    return None if cell is None else cell[field]


def markdown_table(summary: dict[str, dict[str, Any]], labels: dict[str, str]) -> str:
    """The issue's table: sync p50/p99 per size, window-1000 msg/s and consume msg/s per size."""
    head = ("| system (ack after) | sync p50 / p99 µs, 100 B | sync p50 / p99 µs, 1 KiB "
            "| window-1000 msg/s 100 B / 1 KiB | consume msg/s 100 B / 1 KiB |")
    lines = [head, "|---|--:|--:|--:|--:|"]
    for system, label in labels.items():
        s = summary.get(system)
        if s is None:
            continue
        cols = [label]
        for size in SIZES:
            cols.append(f"{_fmt_int(_cell(s, f'latency_{size}', 'p50_us'))} / "
                        f"{_fmt_int(_cell(s, f'latency_{size}', 'p99_us'))}")
        for work in ("produce", "consume"):
            cols.append(" / ".join(_fmt_int(_cell(s, f"{work}_{size}", "msg_per_s")) for size in SIZES))
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines) + "\n"


def cpu_table(summary: dict[str, dict[str, Any]], labels: dict[str, str]) -> str:
    """Client CPU µs per message (all the client process's threads), where measured."""
    keys = [f"{w}_{size}" for w in ("latency", "produce", "consume") for size in SIZES]
    rows = []
    for system, label in labels.items():
        cells = summary.get(system, {})
        if not any("cpu_us_per_msg" in cells.get(k, {}) for k in keys):
            continue
        vals = [cells.get(k, {}).get("cpu_us_per_msg") for k in keys]
        rows.append("| " + label + " | " + " | ".join("–" if v is None else f"{v:.1f}" for v in vals) + " |")
    if not rows:
        return ""
    head = "| client CPU µs/msg | " + " | ".join(k.replace("_", " ") + " B" for k in keys) + " |"
    return "\n".join([head, "|---" + "|--:" * len(keys) + "|", *rows]) + "\n"


def ratio_table(r: dict[str, float], title: str) -> str:
    """One line per cell: the ratio, and whether higher or lower is better."""
    lines = [f"| {title} | ratio | better |", "|---|--:|---|"]
    for key, value in r.items():
        better = "lower" if key.startswith("latency") else "higher"
        lines.append(f"| {key} | {value:.3f} | {better} |")
    return "\n".join(lines) + "\n"


def plot_cdfs(summary: dict[str, dict[str, Any]], labels: dict[str, str], out_dir: Path, stem: str) -> list[Path]:
    """One PNG per message size: the sync publish latency CDF of every system (log x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for size in SIZES:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for system, label in labels.items():
            cell = summary.get(system, {}).get(f"latency_{size}")
            if not cell or not cell["cdf"]:
                continue
            xs, ys = zip(*cell["cdf"])
            ax.step(xs, ys, where="post", label=label.replace("`", ""))
        ax.set_xscale("log")
        ax.set_xlabel("publish latency, one at a time (µs, log scale)")
        ax.set_ylabel("fraction of messages")
        ax.set_title(f"Synchronous publish latency CDF, {size_label(size)} messages")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        path = out_dir / f"{stem}_latency_cdf_{size}B.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
