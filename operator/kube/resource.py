"""A StreamingJob custom resource parsed once per round (or finalizer call): metadata, spec and
status typed, so reconcile.py, deletion.py and what they call read fields, not the raw body's keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.spec import JobSpec, SpecError, parse_spec

from ..decisions.status import OWN_STATUS_SKIP
from ..decisions.status_model import JobStatus, parse_status
from .builders import JobRef


@dataclass(frozen=True)
class JobMeta:
    namespace: str
    name: str
    uid: str
    generation: int = 1
    deleting: bool = False  # metadata.deletionTimestamp is set

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def ref(self) -> JobRef:
        return JobRef(self.namespace, self.name, self.uid)

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class StreamingJob:
    body: Any  # the object as read: only to name it in Events (kopf.event takes the object)
    meta: JobMeta
    spec: JobSpec | None  # None: invalid, spec_error says why
    spec_error: str | None
    status: JobStatus
    stored_status: dict[str, Any]  # our part of status as written: what the status writer diffs against


def own_status(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (body.get("status") or {}).items() if k not in OWN_STATUS_SKIP}


def parse_job(body: dict[str, Any], status: dict[str, Any] | None = None,
              spec_of: Any = parse_spec) -> StreamingJob:
    """`status`: our status when newer than the body's (a decided one not yet written); `spec_of`
    parses the spec (a cache of parsed specs, in reconcile)."""
    meta = body["metadata"]
    stored = status if status is not None else own_status(body)
    try:
        spec, error = spec_of(body.get("spec")), None
    except SpecError as exc:
        spec, error = None, str(exc)
    return StreamingJob(
        body=body,
        meta=JobMeta(namespace=meta["namespace"], name=meta["name"], uid=meta.get("uid", ""),
                     generation=meta.get("generation", 1), deleting=bool(meta.get("deletionTimestamp"))),
        spec=spec, spec_error=error, status=parse_status(stored), stored_status=stored)
