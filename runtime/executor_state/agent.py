"""The executor's agent: the protocol's two calls over HTTP (docs/design.md §4, "Executor-side
state", the next piece). It runs beside an executor, on the executor's disk, with the executor store
role; the driver reaches it with `AgentHandle`. Not yet started by any pod.

  POST   /prepare          PrepareRequest -> ExecutorReport (freezes and hashes; kept for the upload)
  POST   /upload           UploadRequest  -> UploadAck
  DELETE /prepare/<batch>  drops that batch's freeze (after the commit, or the checkpoint's failure)
  PUT    /restore-point    RestoreSet -> {} (the driver, before the query starts: materialize.py)
  POST   /materialize      {dir} -> Materialized (the JVM file system, the first time it touches a
                           state partition directory; a corrupt object is a 502 naming the point)
  GET    /materialized     what this agent materialized (partitions, files and bytes fetched)

Every call needs `Authorization: Bearer <token>` (401 without it or with a wrong one). A prepare for a
batch older than the newest one prepared is refused (409): a leftover driver of an older attempt, or a
late request, never moves an agent back. An upload for a batch not prepared is a 404. A materialize
before the restore point is set is a 409: a partition never starts empty by accident.
"""

from __future__ import annotations

import hmac
import json
import logging
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from sparkpoint.runtime.checkpoint.errors import CheckpointError
from sparkpoint.runtime.checkpoint.hashing import HashCache
from sparkpoint.runtime.checkpoint.restore import RestoreError
from sparkpoint.runtime.store import JobRef, ObjectStore, StoreError

from .materialize import Materializer, NoRestorePoint, RestoreSet
from .prepare import Prepared, prepare
from .report import PrepareRequest, UploadRequest
from .upload import upload

log = logging.getLogger("sparkpoint.executor_state")
MAX_BODY_BYTES = 16 * 1024 * 1024  # a PrepareRequest's lineage: ~40 B per operator, partition and batch


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Agent:
    """One executor's side of the protocol; its freezes live under `work_dir`."""

    def __init__(self, state_root: str | Path, work_dir: str | Path, store: ObjectStore, job: JobRef, *,
                 executor: str, token: str):
        self.state_root, self.work_dir = Path(state_root), Path(work_dir)
        self.store, self.job, self.executor, self.token = store, job, executor, token
        self.hash_cache = HashCache(None)
        self.prepared: dict[int, Prepared] = {}
        self.newest = -1
        self.lock = threading.RLock()  # drop takes it too, inside prepare
        self.materializer = Materializer(self.state_root, store, job)

    def prepare(self, request: PrepareRequest) -> bytes:
        with self.lock:  # one freeze at a time: the hash cache and the newest batch are shared
            if request.batch < self.newest:
                raise Refused(409, f"batch {request.batch} is older than batch {self.newest}, prepared already")
            self.newest = request.batch
            self.drop(request.batch)  # a repeated request freezes again
            prepared = prepare(self.state_root, request, self.work_dir / f"freeze-{request.batch}",
                               executor=self.executor, hash_cache=self.hash_cache)
            self.prepared[request.batch] = prepared
            return prepared.report.to_json()

    def upload(self, request: UploadRequest) -> bytes:
        prepared = self.prepared.get(request.batch)
        if prepared is None:
            raise Refused(404, f"batch {request.batch} is not prepared here")
        return upload(prepared, self.store, self.job, request.checkpoint, request.shas).to_json()

    def set_restore_point(self, restore_set: RestoreSet) -> bytes:
        self.materializer.set_point(restore_set)
        return b"{}"

    def drop(self, batch: int) -> bytes:
        with self.lock:
            self.prepared.pop(batch, None)
            shutil.rmtree(self.work_dir / f"freeze-{batch}", ignore_errors=True)
        return b"{}"


class MaterializeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: str  # the absolute local path of a state/<op>/<partition> directory under the state root


def _handler(agent: Agent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
            log.debug(format, *args)

        def _answer(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self, act) -> None:  # type: ignore[no-untyped-def]
            try:
                header = self.headers.get("Authorization") or ""
                if not hmac.compare_digest(header.encode(), f"Bearer {agent.token}".encode()):
                    raise Refused(401, "a bearer token is needed, and this is not it")
                size = int(self.headers.get("Content-Length") or 0)
                if size > MAX_BODY_BYTES:
                    raise Refused(413, f"body over {MAX_BODY_BYTES} bytes")
                self._answer(200, act(self.rfile.read(size)))
            except Refused as exc:
                self._answer(exc.status, json.dumps({"error": str(exc)}).encode())
            except NoRestorePoint as exc:
                self._answer(409, json.dumps({"error": str(exc)}).encode())
            except RestoreError as exc:  # the restore point is at fault, as in a driver's restore
                log.error("state partition restore failed", extra={"path": self.path, "error": str(exc)})
                self._answer(502, json.dumps({"error": f"RestoreError: {exc}", "reason": exc.reason,
                                              "points": list(exc.points or ())}).encode())
            except (ValidationError, ValueError) as exc:
                self._answer(400, json.dumps({"error": str(exc)}).encode())
            except (CheckpointError, StoreError, OSError) as exc:
                log.warning("executor agent call failed", extra={"path": self.path, "error": str(exc)})
                self._answer(500, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())

        def do_POST(self) -> None:
            if self.path == "/prepare":
                self._serve(lambda body: agent.prepare(PrepareRequest.from_json(body)))
            elif self.path == "/upload":
                self._serve(lambda body: agent.upload(UploadRequest.model_validate_json(body)))
            elif self.path == "/materialize":
                self._serve(lambda body: agent.materializer.materialize(
                    MaterializeRequest.model_validate_json(body).dir).model_dump_json().encode())
            else:
                self._answer(404, b'{"error": "no such call"}')

        def do_PUT(self) -> None:
            if self.path == "/restore-point":
                self._serve(lambda body: agent.set_restore_point(RestoreSet.model_validate_json(body)))
            else:
                self._answer(404, b'{"error": "no such call"}')

        def do_GET(self) -> None:
            if self.path == "/materialized":
                self._serve(lambda _: json.dumps(agent.materializer.summary()).encode())
            else:
                self._answer(404, b'{"error": "no such call"}')

        def do_DELETE(self) -> None:
            batch = self.path.removeprefix("/prepare/")
            if self.path.startswith("/prepare/") and batch.isdigit():
                self._serve(lambda _: agent.drop(int(batch)))
            else:
                self._answer(404, b'{"error": "no such call"}')
    return Handler


def serve(agent: Agent, host: str = "0.0.0.0", port: int = 0) -> ThreadingHTTPServer:  # noqa: S104 (a pod's IP)
    """The agent's server, bound (port 0: any free port); the caller runs serve_forever."""
    return ThreadingHTTPServer((host, port), _handler(agent))
