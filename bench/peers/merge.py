"""Several peer-benchmark runs as one report: the alternating rounds of one run and the extra figures
of another (a 30-minute retention run, 1 GB churn) need not share a session. The first run with
rounds sets the workload; rounds of another workload are not pooled with it (their batch durations
are not comparable) but kept apart, under `other_workloads`, each reported on its own. A report merged
before can be an input: its other workloads carry over."""

from __future__ import annotations

from typing import Any

EXTRA_LISTS = ("recovery", "churn", "retention", "replay")
OTHER_KEYS = ("size", "workload", "rounds", "loads", "command", "results", "versions", "skipped")


def merge(raws: list[dict[str, Any]]) -> dict[str, Any]:
    if not raws:
        raise ValueError("nothing to merge")
    first = next((r for r in raws if r.get("results")), raws[0])
    others = [r for r in raws if r.get("results") and r["workload"] != first["workload"]]
    every = raws  # extra figures (recovery, churn, ...) and limits come from every run
    raws = [r for r in raws if not any(r is o for o in others)]
    with_rounds = [r for r in raws if r.get("results")]
    out = dict(first)
    out["results"] = [res for r in raws for res in r.get("results") or []]
    out["rounds"] = sum(r.get("rounds", 0) for r in with_rounds) if with_rounds else 0
    # The rounds' load is what their ratios ran under; the extra figures' runs keep theirs apart.
    out["loads"] = [load for r in with_rounds for load in r.get("loads") or []] or \
        [load for r in raws for load in r.get("loads") or []]
    out["extras_loads"] = ([load for r in raws if not r.get("results") for load in r.get("loads") or []]
                           + [load for r in with_rounds for load in r.get("extras_loads") or []]) if with_rounds else []
    out["command"] = " ; ".join(r["command"] for r in raws)
    out["skipped"] = {k: v for r in raws for k, v in (r.get("skipped") or {}).items()}
    out["limits"] = next((r["limits"] for r in every if r.get("limits")), None)
    out["restore"] = next((r["restore"] for r in every if r.get("restore")), None)
    extras: dict[str, Any] = {}
    for r in every:
        ex = r.get("extras") or {}
        for key, value in ex.items():
            if key in EXTRA_LISTS:
                extras.setdefault(key, []).extend(value or [])
            else:
                extras.setdefault(key, value)
    out["extras"] = extras
    # A report merged before keeps the other workloads it already carried (re-merging adds runs).
    out["other_workloads"] = [{k: o.get(k) for k in OTHER_KEYS} for o in others] + [
        w for r in every for w in r.get("other_workloads") or []]
    return out
