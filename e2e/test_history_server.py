"""The chart's History Server as a user gets it (issue 30): `helm install` with historyServer.enabled,
its pod run in image mode from the runtime image (the `sync` mirror and Spark's HistoryServer, uid
185), no job named (the mirror finds the jobs of the store itself), and a job from the same image.
After the job's pod is deleted, `kubectl sparkpoint history JOB --list` (the History Server's REST
API through the API server's pod proxy, or at the pod's IP on the node agent) lists both attempts by the operator's numbers: the
drained first one completed, the running second one not. The chart's uiIngress is on for the job too:
the API server takes its Ingress, and the job's pod answers its live UI under the Ingress's path (no
controller here: the test asks the pod at that path, as the controller would).

Needs the runtime image (`make image`, or `SPARKPOINT_IMAGE_SUFFIX=-x scripts/build-image.sh` and
SPARKPOINT_E2E_RUNTIME_IMAGE=sparkpoint/runtime-x:dev); without it the test skips, or fails when
SPARKPOINT_REQUIRE_IMAGES=1."""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.request
from pathlib import Path

import pytest
from kube_helpers import free_port, real_node, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException
from operator_jobs import BUCKET, SECRET, Jobs
from test_image_mode import container_pid, proc_ids, require_image
from test_kubectl_plugin import plugin

RUNTIME_IMAGE = os.environ.get("SPARKPOINT_E2E_RUNTIME_IMAGE", "sparkpoint/runtime:dev")


@pytest.fixture
def chart_values(core, namespace, store_env) -> dict[str, str]:
    """The operator's chart with its History Server: the store Secret exists before `helm install
    --wait` (the sync container reads it), the server on a port of its own (pods share the host's
    network on the local cluster)."""
    require_image(RUNTIME_IMAGE)
    data = {k: base64.b64encode(v.encode()).decode() for k, v in store_env.items()}
    try:
        core.create_namespaced_secret(namespace, client.V1Secret(metadata=client.V1ObjectMeta(name=SECRET), data=data))
    except ApiException as error:
        if error.status != 409:
            raise
    repository, tag = RUNTIME_IMAGE.rsplit(":", 1)
    return {"historyServer.enabled": "true", "historyServer.storeUrl": f"s3://{BUCKET}/{namespace}",
            "historyServer.secretName": SECRET, "historyServer.image.repository": repository,
            "historyServer.image.tag": tag, "historyServer.port": str(free_port()),
            "historyServer.syncInterval": "5s",
            "uiIngress.enabled": "true", "uiIngress.jobs": f"{{{namespace}/clicks}}"}


def _history_pod(core, namespace: str) -> client.V1Pod:
    pods = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component=history-server").items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_charts_history_server_lists_both_attempts_after_a_pod_deletion(api_client, core, namespace, operator,
                                                                        store_env, chart_values):
    t0 = time.monotonic()
    # Both containers of the History Server's pod run inside the runtime image, as uid 185.
    hs_pod = _history_pod(core, namespace)
    for name in ("sync", "history-server"):
        pid = container_pid(hs_pod, name)
        if not real_node(core):  # the agent chroots; a kubelet's container has a mount namespace of its own
            assert os.readlink(f"/proc/{pid}/root") != "/", name
        assert (Path(f"/proc/{pid}/root") / "opt/sparkpoint/jre-version").is_file(), name
        assert proc_ids(pid) == (185, 185), name

    jobs = Jobs(api_client, namespace, store_env)
    jobs.create("clicks", image=RUNTIME_IMAGE)
    jobs.wait_status("clicks", "Running with a checkpoint",
                     lambda s: s.get("phase") == "Running" and s.get("latestCheckpoint"), timeout=480,
                     operator=operator)
    # The live UI under the Ingress's path, answered by the pod's UI front (runtime/service/ui_front.py).
    ingress = client.NetworkingV1Api(api_client).read_namespaced_ingress(f"{operator.release}-sparkpoint-ui", namespace)
    (path,) = ingress.spec.rules[0].http.paths
    assert path.path == f"/sparkpoint/{namespace}/clicks" and path.backend.service.port.name == "spark-ui"
    pod_ip = core.read_namespaced_pod("clicks-1", namespace).status.pod_ip

    def ui_apps() -> list[str] | None:
        # 4040, or the next free port: on the local cluster pods share the host's network, where any
        # Spark UI on 0.0.0.0:4040 takes the port from every pod (the front moves on, as Spark does).
        for port in range(4040, 4057):
            try:
                with urllib.request.urlopen(f"http://{pod_ip}:{port}{path.path}/api/v1/applications",
                                            timeout=30) as r:
                    return [a["name"] for a in json.loads(r.read())]
            except (OSError, ValueError):
                continue
        return None

    assert wait_for("the live UI under the Ingress path", ui_apps, timeout=180, interval=3.0) == \
        [f"sparkpoint-{namespace}-clicks-attempt-1"]
    jobs.core.delete_namespaced_pod("clicks-1", namespace)
    st = jobs.wait_status("clicks", "attempt 2 Running with a checkpoint of its own",
                          lambda s: s.get("attempt") == 2 and s.get("phase") == "Running"
                          and (s.get("latestCheckpoint") or {}).get("id") != (s.get("restore") or {}).get("checkpoint"),
                          timeout=480, operator=operator)
    assert st["lastFailure"]["reason"] == "PodDeleted"

    # The API server refuses to proxy to loopback addresses, which the node agent's pod IPs are: here
    # the plugin reads the server at its pod IP (--server-url), as through an Ingress; on a real node
    # its default path, the API server's pod proxy, applies.
    hs_ip = _history_pod(core, namespace).status.pod_ip
    server = ["--server-url", f"http://{hs_ip}:{chart_values['historyServer.port']}"] \
        if hs_ip.startswith("127.") else []

    def listed() -> list[dict] | None:
        out = plugin("history", "clicks", "-n", namespace, "--server-namespace", namespace, "--list", "-o", "json",
                     *server, check=False, timeout=60)
        if out.returncode != 0:  # the server still starting: the service proxy answers 503
            return None
        apps = json.loads(out.stdout)["applications"]
        # The drained attempt's completed marker arrives with its last upload, then the mirror's next
        # pass and the server's next read (10 s): until then it is listed as still running.
        return apps if [(a["attempt"], a["completed"]) for a in apps] == [(1, True), (2, False)] else None

    apps = wait_for("the History Server listing attempt 1 completed and 2 running", listed, timeout=300,
                    interval=5.0)
    assert [a["name"] for a in apps] == [f"sparkpoint-{namespace}-clicks-attempt-1",
                                         f"sparkpoint-{namespace}-clicks-attempt-2"]
    assert [a["completed"] for a in apps] == [True, False]  # the deleted pod drained; the second runs
    table = plugin("history", "clicks", "-n", namespace, "--server-namespace", namespace, "--list", *server).stdout
    assert table.splitlines()[0].split()[:3] == ["ATTEMPT", "RESTART", "COMPLETED"] and len(table.splitlines()) == 3
    print(f"History Server listed both attempts {time.monotonic() - t0:.0f} s after the test started")
