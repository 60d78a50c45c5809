"""What the operator knows from the checkpoint store, per job: its recent checkpoints and savepoints.

Read through a cache: every STORE_REFRESH seconds while the runtime answers (behind the job's
rounds, so a slow store never makes a trigger late), every STORE_REFRESH_BLIND seconds while it
does not (then the store is the only source, and the round waits for it), and within
SAVEPOINT_RECHECK seconds when a savepoint the round expects is not listed yet. Store clients are
shared by the jobs that use the same store URL and credentials; Secrets are read at most every
SECRET_TTL seconds (at once again after a store error: maybe rotated credentials).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache, TTLCache, cached
from kubernetes.client.rest import ApiException

from sparkpoint.runtime.spec import JobSpec
from sparkpoint.runtime.store import JobRef as StoreJob

from ..kube.caches import secret_fingerprint
from ..kube.client import Kube
from . import view as store_view
from .ref import StorageRef

log = logging.getLogger("sparkpoint.operator")
STORE_REFRESH = 60.0
STORE_REFRESH_BLIND = 15.0  # while the runtime is unreachable the store is the only source
SAVEPOINT_RECHECK = 3.0  # a savepoint the runtime or status names but the cache lacks: look again this soon
SECRET_TTL = 120.0  # a changed storage Secret is read again within this (at once after a store error)
STORE_CLIENT_TTL = 600.0
STORE_THREADS = 8  # blocking store reads (every job's refresh) run here, not in kube's executor
ROUTINE_STORE_READS = 4  # background refreshes at once: the other threads serve rounds that wait
KNOWN_MANIFESTS = 12_000  # checkpoint facts kept (about RECENT_MANIFESTS per job at 1,000 jobs)


@dataclass
class JobFacts:
    read_at: float = 0.0
    checkpoints: list | None = None
    savepoints: list | None = None
    refresh: asyncio.Task | None = None  # a routine refresh running behind the job's rounds


class StoreFacts:
    def __init__(self, kube: Kube | None, clock: Callable[[], float], *, own_identity: bool = False):
        self.kube, self.clock = kube, clock
        # A store whose job names no Secret is read with the operator's own cloud identity only
        # when its admin says so (--store-own-identity): that identity may reach every tenant's store.
        self.own_identity = own_identity
        self._jobs: dict[tuple[str, str], JobFacts] = {}
        # TTL caches (the least recently used go first when full), used from the event loop only.
        self._secrets: TTLCache[tuple[str, str], dict[str, str]] = TTLCache(4096, SECRET_TTL)
        self._clients: TTLCache[tuple[str, str], Any] = TTLCache(64, STORE_CLIENT_TTL)
        # Read on the store threads, hence the lock; a failed read is not kept. Keyed by job and id.
        self.checkpoint_fact = cached(LRUCache(KNOWN_MANIFESTS), lock=threading.Lock(),
                                      key=lambda _store, job, cid: (job.namespace, job.name, cid),
                                      )(store_view.checkpoint_fact)
        self._pool = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="store")
        self._routine_reads = asyncio.Semaphore(ROUTINE_STORE_READS)
        self._secret_reads: dict[tuple[str, str], asyncio.Future] = {}

    def forget_job(self, key: tuple[str, str]) -> None:
        if (facts := self._jobs.pop(key, None)) and facts.refresh:
            facts.refresh.cancel()

    async def facts(self, namespace: str, name: str, spec: JobSpec, blind: bool, expect: set[str]) -> JobFacts:
        """The job's facts for this round. `blind`: the runtime could not be asked; `expect`:
        savepoints that should be listed."""
        facts = self._jobs.setdefault((namespace, name), JobFacts())
        age = self.clock() - facts.read_at
        known = {s["name"] for s in facts.savepoints or []}
        missing = bool(expect - known) and age >= SAVEPOINT_RECHECK
        if age < (STORE_REFRESH_BLIND if blind else STORE_REFRESH) and not missing:
            return facts
        facts.read_at = self.clock()
        if facts.checkpoints is not None and not blind and not missing:
            # A routine refresh while the runtime answers: behind the round, which decides on the
            # facts it has (a slow store must not make this round's checkpoint trigger late).
            if facts.refresh is None or facts.refresh.done():
                facts.refresh = asyncio.create_task(self._routine_read(facts, namespace, name, spec))
            return facts
        await self.read(facts, namespace, name, spec)
        return facts

    async def _routine_read(self, facts: JobFacts, namespace: str, name: str, spec: JobSpec) -> None:
        async with self._routine_reads:
            await self.read(facts, namespace, name, spec)

    async def read(self, facts: JobFacts, namespace: str, name: str, spec: JobSpec) -> None:
        try:
            store = await self.open_store(namespace, spec)
            if store is None:
                return
            job = StoreJob(namespace, name)
            loop = asyncio.get_running_loop()
            facts.checkpoints = await loop.run_in_executor(self._pool, store_view.recent_checkpoints,
                                                           store, job, self.checkpoint_fact)
            facts.savepoints = await loop.run_in_executor(self._pool, store_view.savepoints, store, job)
        except Exception as exc:  # the store may be down: decide on what the runtime says
            log.warning("store not readable", extra={"job": f"{namespace}/{name}", "error": type(exc).__name__})
            self.forget_credentials(namespace, spec)  # maybe rotated credentials: read the Secret again

    async def open_store(self, namespace: str, spec: JobSpec, deletes: bool = False) -> Any:
        """The job's store client (None: the demo's pod-local directory, which the operator cannot
        reach). `deletes`: with spec.gc.secretRef's credential when set (the storage Secret's may
        lack delete rights)."""
        storage = store_view.storage_of(spec)
        return None if storage is None else await self.open_storage(namespace, storage, deletes)

    async def open_storage(self, namespace: str, storage: StorageRef, deletes: bool = False) -> Any:
        """The store client for a storage reference (a job's, or one a savepoint recorded): one per
        store URL and credentials, shared (a client holds a connection pool). Raises
        store_view.SecretMissing when its Secret does not exist."""
        secret = None
        name, field = store_view.secret_for(storage, deletes)
        if name:
            secret = self._secrets.get((namespace, name))
            if secret is None:
                try:
                    secret = await self._read_secret((namespace, name))
                except ApiException as exc:
                    if exc.status == 404:
                        raise store_view.SecretMissing(f"Secret {name!r} ({field}) not found") from None
                    raise
        client_key = (storage.url, secret_fingerprint(store_view.store_env(storage, secret)))
        client = self._clients.get(client_key)
        if client is None:
            client = self._clients[client_key] = store_view.open_job_store(
                storage, secret, STORE_THREADS, own_identity=self.own_identity and name is None)
        return client

    async def _read_secret(self, key: tuple[str, str]) -> dict[str, str]:
        """One read per Secret at a time: 1,000 jobs starting together share it (a thundering herd
        of identical GETs would queue ahead of everything else on the kube threads)."""
        task = self._secret_reads.get(key)
        if task is None:
            task = self._secret_reads[key] = asyncio.ensure_future(self.kube.secret_data(*key))
            task.add_done_callback(lambda _: self._secret_reads.pop(key, None))
        secret = self._secrets[key] = await asyncio.shield(task)
        return secret

    def forget_credentials(self, namespace: str, spec: JobSpec) -> None:
        storage = store_view.storage_of(spec)
        if storage is None:
            return
        for name in {storage.secret_name, storage.gc_secret_name} - {None}:
            secret = self._secrets.pop((namespace, name), None)
            if secret is not None:
                self._clients.pop((storage.url, secret_fingerprint(store_view.store_env(storage, secret))), None)
