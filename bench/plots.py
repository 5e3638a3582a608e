"""PNG plots of the suite's rows (matplotlib, headless)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on CI or a server
import matplotlib.pyplot as plt

from bench.analysis import Row, of, with_efficiency
from bench.soak_schedule import KINDS
from bench.workloads import DEPTH

COLORS = {0.0: "tab:blue", 0.05: "tab:orange", 0.5: "tab:green"}
STYLES = {100: ":", 10_000: "-"}


def _series(rows: list[Row], field: str, workload: str, latency: float, keys: int):
    points = sorted(
        (r["bound"], r[field])
        for r in rows
        if r["workload"] == workload and r["latency"] == latency and r["keys"] == keys
    )
    return [b for b, _ in points], [v for _, v in points]


def _log_axes(ax, title: str, xlabel: str, ylabel: str, *, legend_size: int) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=legend_size)


def _save(fig, out: Path) -> Path:
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def _per_workload(rows: list[Row], field: str, ylabel: str, out: Path, *, peers: bool) -> Path:
    fig, axes = plt.subplots(1, len(DEPTH), figsize=(5 * len(DEPTH), 4), squeeze=False)
    for ax, workload in zip(axes[0], DEPTH, strict=True):
        mine = [r for r in rows if r["workload"] == workload and r["section"] == "ours"]
        for latency in sorted({r["latency"] for r in mine}):
            for keys in sorted({r["keys"] for r in mine}):
                xs, ys = _series(mine, field, workload, latency, keys)
                if xs:
                    color = COLORS.get(latency)
                    label = f"ours L={latency * 1000:g} ms, {keys:,} keys"
                    ax.plot(xs, ys, STYLES.get(keys, "-"), marker="o", color=color, label=label)
        if peers and workload == "one_call":
            for section, marker in (("baseline", "s"), ("peer", "^")):
                for r in of(rows, section):
                    ax.scatter(r["bound"], r[field], marker=marker, color=COLORS.get(r["latency"]),
                               edgecolors="black", zorder=3)  # fmt: skip
            ax.scatter([], [], marker="s", color="grey", label="naive keyed fn (bound 1)")
            ax.scatter([], [], marker="^", color="grey", label="flink-agents 0.2 (bound = threads)")
        _log_axes(
            ax,
            f"workload {workload} (depth {DEPTH[workload]})",
            "in-flight bound (max_in_flight; peers: threads)",
            ylabel,
            legend_size=7,
        )
    return _save(fig, out)


def _latency(rows: list[Row], out: Path) -> Path:
    fig, axes = plt.subplots(1, len(DEPTH), figsize=(5 * len(DEPTH), 4), squeeze=False)
    for ax, workload in zip(axes[0], DEPTH, strict=True):
        for latency in sorted({r["latency"] for r in rows if r["workload"] == workload}):
            for keys in sorted({r["keys"] for r in rows if r["workload"] == workload}):
                for field, style in (("p50_ms", "-"), ("p99_ms", "--")):
                    xs, ys = _series(rows, field, workload, latency, keys)
                    if xs:
                        label = f"{field[:3]} L={latency * 1000:g} ms, {keys:,} keys"
                        ax.plot(xs, ys, style, marker=".", color=COLORS.get(latency), label=label,
                                alpha=1.0 if keys == 10_000 else 0.5)  # fmt: skip
        _log_axes(
            ax,
            f"latency, workload {workload}",
            "in-flight bound (max_in_flight)",
            "ms, source to output",
            legend_size=6,
        )
    return _save(fig, out)


def _durability(rows: list[Row], out: Path) -> Path:
    data = of(rows, "durability")
    latencies = sorted({r["latency"] for r in data})
    fig, ax = plt.subplots(figsize=(6, 4))
    for offset, store in ((-0.2, "none"), (0.2, "kafka")):
        values = [
            next((r["runs_per_s"] for r in data if r["latency"] == lat and r["store"] == store), 0)
            for lat in latencies
        ]
        ax.bar([i + offset for i in range(len(latencies))], values, width=0.4, label=store)
    ax.set_xticks(range(len(latencies)), [f"L={lat * 1000:g} ms" for lat in latencies])
    ax.set_ylabel("runs/s (workload 1)")
    ax.set_title("durability overhead: no store vs Kafka store")
    ax.legend()
    return _save(fig, out)


def _rebuild(rows: list[Row], out: Path) -> Path:
    data = of(rows, "rebuild")
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"{r['older']:,}" for r in data]
    ax.bar(labels, [r["restore_ms"] for r in data], label="restore from marker")
    ax.set_xlabel("older records in the topic")
    ax.set_ylabel("ms")
    ax.set_title("store rebuild for the same post-checkpoint state")
    ax.legend()
    return _save(fig, out)


def draw_all(rows: list[Row], out: Path) -> list[Path]:
    """Every plot whose data is present; returns the files written."""
    ours = of(rows, "ours")
    peers = ours + [r for r in rows if r["section"] in ("baseline", "peer")]
    written = []
    if ours:
        written.append(_per_workload(peers, "runs_per_s", "runs/s", out / "throughput.png",
                                     peers=True))  # fmt: skip
        written.append(_latency(ours, out / "latency.png"))
        written.append(_per_workload(with_efficiency(rows), "efficiency", "efficiency",
                                     out / "efficiency.png", peers=False))  # fmt: skip
    if of(rows, "durability"):
        written.append(_durability(rows, out / "durability.png"))
    if of(rows, "rebuild"):
        written.append(_rebuild(rows, out / "rebuild.png"))
    return written


FAULT_COLORS = {
    "taskmanager": "tab:red",
    "broker": "tab:purple",
    "model": "tab:olive",
    "checkpoints": "tab:cyan",
}


def soak_timeline(
    samples: list[dict[str, float]], faults: list[dict[str, object]], out: Path
) -> Path:
    """A soak over time (bench/soak.py): committed outputs per minute and the largest
    TaskManager's and the JobManager's RSS, each fault a shaded span (a line for a kill)."""
    start = samples[0]["t"] if samples else 0.0
    minutes = [(s["t"] - start) / 60 for s in samples]
    fig, (rate_ax, rss_ax) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    rates = [0.0] + [
        (b["outputs"] - a["outputs"]) / (b["t"] - a["t"]) * 60 for a, b in pairwise(samples)
    ]
    rate_ax.plot(minutes, rates, color="tab:blue", linewidth=0.8)
    rate_ax.set_ylabel("outputs / min")
    rate_ax.set_title("soak: committed outputs and RSS, faults shaded")
    for role, color in (("taskmanager", "tab:green"), ("jobmanager", "tab:gray")):
        points = [
            ((s["t"] - start) / 60, max(v for k, v in s.items() if k.startswith(f"{role}_rss_mb@")))
            for s in samples
            if any(k.startswith(f"{role}_rss_mb@") for k in s)
        ]
        label = f"{role} RSS" + (" (largest)" if role == "taskmanager" else "")
        rss_ax.plot([t for t, _ in points], [v for _, v in points], color=color, label=label)
    rss_ax.set_ylabel("MB")
    rss_ax.set_xlabel("minutes")
    for fault in faults:
        begin = (float(str(fault["start"])) - start) / 60
        end = (float(str(fault["end"])) - start) / 60
        color = FAULT_COLORS[KINDS[str(fault["kind"])][0]]
        for ax in (rate_ax, rss_ax):
            if end - begin > 0.01:
                ax.axvspan(begin, end, color=color, alpha=0.2)
            else:
                ax.axvline(begin, color=color, alpha=0.6, linewidth=0.8)
    for target, color in FAULT_COLORS.items():
        rss_ax.plot([], [], color=color, alpha=0.5, linewidth=6, label=f"{target} fault")
    rss_ax.legend(fontsize=7, loc="lower right")
    return _save(fig, out)
