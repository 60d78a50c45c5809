"""The driver's side of the agent's HTTP calls (agent.py): an `ExecutorHandle` for one executor."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from sparkpoint.runtime.checkpoint.errors import CheckpointError

from .report import ExecutorReport, PrepareRequest, UploadAck, UploadRequest


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
        req = urllib.request.Request(f"{self.url}{path}", data=body, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 (the agent's URL)
                return bytes(resp.read())
        except urllib.error.HTTPError as err:
            try:
                reason = json.loads(err.read()).get("error", "")
            except ValueError:
                reason = ""
            raise CheckpointError(f"executor agent {self.url}{path}: HTTP {err.code} {reason}") from None
        except OSError as exc:
            raise CheckpointError(f"executor agent {self.url}{path} unreachable: {exc}") from None
