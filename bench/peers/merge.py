"""Several peer-benchmark runs as one report: the alternating rounds of one run and the extra figures
of another (a 30-minute retention run, 1 GB churn) need not share a session. Runs whose rounds used
different workloads are not merged: their batch durations would not be comparable."""

from __future__ import annotations

from typing import Any

EXTRA_LISTS = ("recovery", "churn", "retention", "replay")


def merge(raws: list[dict[str, Any]]) -> dict[str, Any]:
    if not raws:
        raise ValueError("nothing to merge")
    with_rounds = [r for r in raws if r.get("results")]
    workloads = {repr(sorted(r["workload"].items())) for r in with_rounds}
    if len(workloads) > 1:
        raise ValueError("the runs' rounds used different workloads: " + "; ".join(sorted(workloads)))
    first = with_rounds[0] if with_rounds else raws[0]
    out = dict(first)
    out["results"] = [res for r in raws for res in r.get("results") or []]
    out["rounds"] = sum(r.get("rounds", 0) for r in with_rounds) if with_rounds else 0
    out["loads"] = [load for r in raws for load in r.get("loads") or []]
    out["command"] = " ; ".join(r["command"] for r in raws)
    out["skipped"] = {k: v for r in raws for k, v in (r.get("skipped") or {}).items()}
    out["limits"] = next((r["limits"] for r in raws if r.get("limits")), None)
    out["restore"] = next((r["restore"] for r in raws if r.get("restore")), None)
    extras: dict[str, Any] = {}
    for r in raws:
        ex = r.get("extras") or {}
        for key, value in ex.items():
            if key in EXTRA_LISTS:
                extras.setdefault(key, []).extend(value or [])
            else:
                extras.setdefault(key, value)
    out["extras"] = extras
    return out
