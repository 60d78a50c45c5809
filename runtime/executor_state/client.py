"""The driver's side of the agent's HTTP calls (agent.py): an `ExecutorHandle` for one executor's
checkpoint, and an `AgentClient` for the calls outside one (the restore point, what was materialized)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from sparkpoint.runtime.checkpoint.errors import CheckpointError

from .materialize import RestoreSet
from .report import ExecutorReport, PrepareRequest, UploadAck, UploadRequest


class AgentClient:
    """One agent's URL and the attempt's token."""

    def __init__(self, url: str, token: str, *, timeout: float = 300.0):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def set_restore_point(self, restore_set: RestoreSet) -> None:
        """Before the query starts: what its partitions are materialized from (None: a fresh start)."""
        _call(self.url, self.token, self.timeout, "PUT", "/restore-point", restore_set.model_dump_json().encode())

    def materialized(self) -> dict[str, Any]:
        return dict(json.loads(_call(self.url, self.token, self.timeout, "GET", "/materialized", None)))


class AgentHandle:
    """Asks the agent at `url` to prepare `request` at once; then uploads on the driver's demand."""

    def __init__(self, url: str, token: str, request: PrepareRequest, *, timeout: float = 300.0):
        self.url, self.token, self.batch, self.timeout = url.rstrip("/"), token, request.batch, timeout
        self.report = ExecutorReport.from_json(self._call("POST", "/prepare", request.to_json()))

    def upload(self, checkpoint: str, shas: list[str]) -> UploadAck:
        body = UploadRequest(batch=self.batch, checkpoint=checkpoint, shas=shas).to_json()
        return UploadAck.from_json(self._call("POST", "/upload", body))

    def release(self) -> None:
        """Drop the agent's freeze of this batch (after the commit or the checkpoint's failure)."""
        self._call("DELETE", f"/prepare/{self.batch}", None)

    def _call(self, method: str, path: str, body: bytes | None) -> bytes:
        return _call(self.url, self.token, self.timeout, method, path, body)


def _call(url: str, token: str, timeout: float, method: str, path: str, body: bytes | None) -> bytes:
    req = urllib.request.Request(f"{url}{path}", data=body, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (the agent's URL)
            return bytes(resp.read())
    except urllib.error.HTTPError as err:
        try:
            reason = json.loads(err.read()).get("error", "")
        except ValueError:
            reason = ""
        raise CheckpointError(f"executor agent {url}{path}: HTTP {err.code} {reason}") from None
    except OSError as exc:
        raise CheckpointError(f"executor agent {url}{path} unreachable: {exc}") from None
