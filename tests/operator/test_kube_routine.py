"""Routine status writes never take every kube thread (operator/kube/client.py): a restart's calls get
through while the API server is slow to answer a backlog of routine PATCHes."""

from __future__ import annotations

import asyncio

from kubernetes import client
from kubernetes.client.rest import ApiException

from sparkpoint.operator.kube import client as kube


def test_routine_status_writes_leave_threads_for_urgent_calls(monkeypatch):
    async def scenario():
        k = kube.Kube(client.ApiClient(), threads=4)
        gate, running = asyncio.Event(), []

        async def slow_call(fn, *args, **kwargs):  # what the API server answers, when released
            running.append(args[-1] if args else fn)
            await gate.wait()
            return {}
        monkeypatch.setattr(k, "_run", slow_call)
        routine = [asyncio.create_task(k.patch_status("ns", f"job-{i}", {"n": i}, routine=True)) for i in range(10)]
        await asyncio.sleep(0.01)
        assert len(running) == 3  # threads - 1 at most
        urgent = asyncio.create_task(k.patch_status("ns", "restarting", {"phase": "Pending"}))
        await asyncio.sleep(0.01)
        assert len(running) == 4 and running[-1] == {"status": {"phase": "Pending"}}
        gate.set()
        await asyncio.gather(urgent, *routine)
        assert len(running) == 11
    asyncio.run(scenario())


def test_a_later_attempts_config_map_is_replaced_in_one_call_and_created_if_gone(monkeypatch):
    async def scenario(existing: set[str]):
        k = kube.Kube(client.ApiClient())
        calls = []

        async def api(fn, *args, **kwargs):
            calls.append(fn.__name__)
            if fn.__name__.startswith("replace") and args[0] not in existing:
                raise ApiException(status=404)
            if fn.__name__.startswith("create") and args[1]["metadata"]["name"] in existing:
                raise ApiException(status=409)
            return {}
        monkeypatch.setattr(k, "_run", api)
        body = {"kind": "ConfigMap", "metadata": {"name": "clicks-job", "namespace": "ns"}, "data": {}}
        await k.apply_config_map(body, exists=True)
        return calls
    assert asyncio.run(scenario({"clicks-job"})) == ["replace_namespaced_config_map"]
    assert asyncio.run(scenario(set())) == ["replace_namespaced_config_map", "create_namespaced_config_map"]
