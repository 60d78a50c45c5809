"""Pure parts of the kubectl plugin: tables, ages, sizes, the patches and bodies it sends."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import yaml
from pydantic import ValidationError

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, NAME_PATTERN, ExecutorsSpec, SparkSection

CHECKPOINT_ID = re.compile(r"^chk-[0-9]{6,}$")
OUTPUTS = ("json", "yaml", "wide")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def age(value: str | None, now: datetime) -> str:
    """kubectl's short age: 45s, 12m, 5h, 3d (and <unknown> for none)."""
    then = parse_time(value)
    if then is None:
        return "<none>"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "d" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def size(n: int | None) -> str:
    if n is None:
        return "<none>"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Columns padded like kubectl's (three spaces apart), no trailing blanks."""
    cells = [[str(c) for c in headers]] + [["<none>" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def job_rows(items: list[dict], now: datetime, *, wide: bool = False,
             namespaces: bool = False) -> tuple[list[str], list[list[Any]]]:
    headers = ["NAME", "PHASE", "CHECKPOINT", "CHECKPOINT-AGE", "RESTARTS", "AGE"]
    if wide:
        headers += ["STATE", "ATTEMPT", "POD", "IMAGE"]
    if namespaces:
        headers.insert(0, "NAMESPACE")
    rows = []
    for job in items:
        st, meta, spec = job.get("status") or {}, job["metadata"], job.get("spec") or {}
        latest = st.get("latestCheckpoint") or {}
        row = [meta["name"], st.get("phase", "<none>"), latest.get("id"), age(latest.get("completedAt"), now),
               st.get("restarts", 0), age(meta.get("creationTimestamp"), now)]
        if wide:
            row += [spec.get("state", "running"), st.get("attempt"), st.get("pod"), spec.get("image")]
        if namespaces:
            row.insert(0, meta.get("namespace"))
        rows.append(row)
    return headers, rows


def status_text(job: dict, now: datetime) -> str:
    st, meta, spec = job.get("status") or {}, job["metadata"], job.get("spec") or {}
    latest = st.get("latestCheckpoint") or {}
    lines = [
        f"Name:             {meta['namespace']}/{meta['name']}",
        f"Phase:            {st.get('phase', '<none>')}   (spec.state: {spec.get('state', 'running')})",
        f"Attempt:          {st.get('attempt', '<none>')}   pod {st.get('pod', '<none>')}",
        f"Restarts:         {st.get('restarts', 0)}   local recoveries {st.get('localRecoveries', 0)}",
        f"Latest checkpoint: {latest.get('id', '<none>')}   batch {latest.get('batch', '<none>')}, "
        f"{size(latest.get('bytes'))}, {age(latest.get('completedAt'), now)} ago",
    ]
    restore = st.get("restore") or {}
    if restore:
        lines.append(f"Restored from:    {restore.get('source', '<none>')} {restore.get('checkpoint') or ''}".rstrip())
    rescale = st.get("lastRescale") or {}
    if rescale:
        lines.append(f"Last rescale:     {rescale.get('from')} -> {rescale.get('to')} partitions in "
                     f"{rescale.get('durationSeconds')}s (attempt {rescale.get('attempt')}, "
                     f"{age(rescale.get('at'), now)} ago)")
    next_at = parse_time(st.get("nextAttemptAt"))
    if next_at is not None and st.get("phase") == "Recovering":
        wait = int((next_at - now).total_seconds())
        lines.append(f"Next attempt:     {'in ' + str(wait) + 's' if wait > 0 else 'now'} (backoff after failures in a row)")
    failure = st.get("lastFailure")
    if failure:
        lines.append(f"Last failure:     {failure.get('reason')}: {failure.get('message')} "
                     f"({age(failure.get('at'), now)} ago)")
    conditions = st.get("conditions") or []
    if conditions:
        lines.append("Conditions:")
        lines += ["  " + line for line in table(
            ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
            [[c["type"], c["status"], c.get("reason"), age(c.get("lastTransitionTime"), now), c.get("message", "")]
             for c in conditions]).splitlines()]
    return "\n".join(lines)


def checkpoint_rows(status: dict, now: datetime) -> tuple[list[str], list[list[Any]]]:
    """The job's recent checkpoints (newest first), then its savepoints, as one table."""
    rows: list[list[Any]] = [
        ["checkpoint", c["id"], c.get("batch"), size(c.get("bytes")), size(c.get("newBytes")),
         age(c.get("completedAt"), now)] for c in reversed(status.get("checkpoints") or [])]
    rows += [["savepoint", s["name"], s.get("batch"), size(s.get("bytes")), "", age(s.get("completedAt"), now)]
             for s in reversed(status.get("savepoints") or [])]
    return ["KIND", "ID", "BATCH", "SIZE", "UPLOADED", "AGE"], rows


def render(obj: Any, output: str) -> str:
    if output == "json":
        return json.dumps(obj, indent=2, sort_keys=True, default=str)
    if output == "yaml":
        return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False).rstrip()
    raise ValueError(f"-o/--output: {output!r} is not one of {', '.join(OUTPUTS)}")


def restore_patch(source: str) -> dict:
    """spec.restoreFrom naming a checkpoint (chk-NNNNNN) or a savepoint (its name); a merge patch,
    so the other key is cleared."""
    if CHECKPOINT_ID.match(source):
        return {"spec": {"restoreFrom": {"checkpoint": source, "savepoint": None}}}
    if re.fullmatch(NAME_PATTERN, source) and len(source) <= 63 and not source.startswith("chk-"):
        return {"spec": {"restoreFrom": {"savepoint": source, "checkpoint": None}}}
    raise ValueError(f"--from: {source!r} is neither a checkpoint id (chk-NNNNNN) nor a savepoint name "
                     "(a DNS label: lowercase letters, digits and '-')")


def rescale_patch(partitions: int | None, executors: int | None) -> dict:
    """spec.spark.shufflePartitions (the state is repartitioned by the upgrade it starts) and/or
    spec.spark.executors.instances, checked by the spec model's own bounds before any call."""
    if partitions is None and executors is None:
        raise ValueError("rescale: give --partitions N, --executors N, or both")
    spark: dict[str, Any] = {}
    try:
        if partitions is not None:
            SparkSection.model_validate({"shufflePartitions": partitions})
            spark["shufflePartitions"] = partitions
        if executors is not None:
            ExecutorsSpec.model_validate({"instances": executors})
            spark["executors"] = {"instances": executors}
    except ValidationError as err:
        first = err.errors()[0]
        flag = "--partitions" if first["loc"][0] == "shufflePartitions" else "--executors"
        raise ValueError(f"{flag}: {first['msg']}") from None
    return {"spec": {"spark": spark}}


def executor_count(executors: dict | None) -> str:
    """What a job's spec.spark.executors asks for, in words: a fixed count or a dynamic range."""
    dynamic = (executors or {}).get("dynamic")
    if dynamic:
        return (f"executors.dynamic = {dynamic.get('min', 1)}..{dynamic.get('max')} "
                f"(idle {dynamic.get('idleTimeout', '60s')})")
    return f"executors.instances = {(executors or {}).get('instances', '<none>')}"


def state_patch(state: str) -> dict:
    return {"spec": {"state": state}}


# The nonces the operator watches: spec.restartNonce restarts the job from its latest checkpoint,
# spec.checkpoint.triggerNonce asks for a checkpoint now (docs/design.md §9).
NONCES = {"restart": ("restartNonce",), "checkpoint": ("checkpoint", "triggerNonce")}


def nonce_patch(job: dict, command: str) -> tuple[dict, int]:
    """A merge patch setting the command's nonce to one more than the job's, with the job's
    resourceVersion as a precondition: two requests at once are two changes (the later one is
    refused with a Conflict and made again on the job as it then is), never one lost in the other."""
    path = NONCES[command]
    node: Any = job.get("spec") or {}
    for key in path[:-1]:
        node = node.get(key) or {}
    current = node.get(path[-1])
    nonce = (current if isinstance(current, int) else 0) + 1
    patch: dict[str, Any] = {path[-1]: nonce}
    for key in reversed(path[:-1]):
        patch = {key: patch}
    meta = {"resourceVersion": rv} if (rv := (job.get("metadata") or {}).get("resourceVersion")) else {}
    return {"metadata": meta, "spec": patch} if meta else {"spec": patch}, nonce


def savepoint_body(job: str, name: str | None) -> dict:
    """A StreamingJobSavepoint for `job` (its own name generated by the API server unless given)."""
    meta: dict[str, Any] = {"name": name} if name else {"generateName": f"{job}-"[:58]}
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": "StreamingJobSavepoint", "metadata": meta,
            "spec": {"jobName": job}}
