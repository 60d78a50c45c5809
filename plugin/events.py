"""`kubectl sparkpoint events [JOB]`: the Events of a job and of what it owns (its pods, executor pods,
savepoints, cleanup pods: all named `<job>-...`), oldest first, as `kubectl events` shows them. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .format import age, parse_time

KINDS = ("StreamingJob", "StreamingJobSavepoint")


def last_seen(event: dict[str, Any]) -> str | None:
    meta = event.get("metadata") or {}
    return event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or \
        meta.get("creationTimestamp")


def belongs_to(event: dict[str, Any], job: str | None) -> bool:
    """The job's own Events and those of objects named after it; without a job, every Event of a
    Sparkpoint resource."""
    obj = event.get("involvedObject") or {}
    name = obj.get("name") or ""
    if job is None:
        return obj.get("kind") in KINDS
    return name == job or name.startswith(f"{job}-")


def job_events(events: list[dict[str, Any]], job: str | None, now: datetime,
               since: float | None = None) -> list[dict[str, Any]]:
    """The matching Events, oldest first; with `since` (seconds) only those seen within it."""
    cutoff = now - timedelta(seconds=since) if since else None
    chosen = []
    for event in events:
        if not belongs_to(event, job):
            continue
        seen = parse_time(last_seen(event))
        if cutoff is not None and (seen is None or seen < cutoff):
            continue
        chosen.append(event)
    return sorted(chosen, key=lambda e: parse_time(last_seen(e)) or now)


def event_rows(events: list[dict[str, Any]], now: datetime,
               namespaces: bool = False) -> tuple[list[str], list[list[Any]]]:
    headers = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    rows = []
    for e in events:
        obj = e.get("involvedObject") or {}
        row = [age(last_seen(e), now), e.get("type"), e.get("reason"),
               f"{(obj.get('kind') or '').lower()}/{obj.get('name')}", " ".join((e.get("message") or "").split())]
        rows.append([(e.get("metadata") or {}).get("namespace"), *row] if namespaces else row)
    return (["NAMESPACE", *headers] if namespaces else headers), rows
