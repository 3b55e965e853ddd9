"""Small helpers shared by the benchmarks: percentiles and a fixed-width report line."""

from __future__ import annotations

import statistics


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def line(label: str, value: str) -> str:
    return f"{label:<44} {value}"
