"""spec.podTemplate on the cluster (issue 40, docs/design.md §9 "Pod templates"): a job whose template
adds an env var from a Secret, a volume, a toleration, a nodeSelector matching the node, an
annotation and a sidecar runs and checkpoints, and its pod shows each of them (the operator's own
fields as they were); a template that sets an operator-owned field is refused by the API server at
admission, naming the field. The merge rules themselves are unit-tested (tests/runtime/test_pod_template.py)."""

from __future__ import annotations

import base64
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from operator_jobs import Jobs

SECRET = "pod-template-e2e"
SECRET_VALUE = "e2e-7f3a-not-in-any-configmap"
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 185, "allowPrivilegeEscalation": False,
              "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}


def _template(node: str, image: str) -> dict:
    return {
        "metadata": {"annotations": {"e2e.sparkpoint.dev/note": "from-the-template"},
                     "labels": {"e2e-team": "pod-template"}},
        "spec": {
            "containers": [
                {"name": "runtime",
                 "env": [{"name": "E2E_TOKEN", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "token"}}}],
                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
                {"name": "idle-sidecar", "image": image, "command": ["sleep", "infinity"],
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
                 "securityContext": RESTRICTED},
            ],
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}}],
            # A taint no node has: tolerated all the same, and shown in the pod.
            "tolerations": [{"key": "e2e.sparkpoint.dev/dedicated", "operator": "Equal", "value": "streaming",
                             "effect": "NoSchedule"}],
            "nodeSelector": {"kubernetes.io/hostname": node},
        },
    }


def _secret(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=SECRET), data={"token": base64.b64encode(SECRET_VALUE.encode()).decode()}))


@pytest.mark.timeout(900)
def test_a_job_with_a_pod_template_runs_checkpoints_and_its_pod_shows_the_template(api_client, namespace,
                                                                                   operator, store_env):
    jobs = Jobs(api_client, namespace, store_env)
    node = jobs.core.list_node().items[0].metadata.labels["kubernetes.io/hostname"]
    _secret(jobs.core, namespace)
    image = "sparkpoint:e2e"
    jobs.create("templated", image=image, podTemplate=_template(node, image))
    jobs.wait_status("templated", "Running with a checkpoint",
                     lambda s: s.get("phase") == "Running" and bool(s.get("latestCheckpoint")),
                     timeout=420, operator=operator)
    pod = jobs.core.read_namespaced_pod("templated-1", namespace)
    assert pod.metadata.annotations["e2e.sparkpoint.dev/note"] == "from-the-template"
    assert pod.metadata.annotations["sparkpoint.dev/attempt"] == "1"  # the operator's own, kept
    assert pod.metadata.labels["e2e-team"] == "pod-template"
    assert pod.metadata.labels["sparkpoint.dev/job"] == "templated"
    assert pod.spec.node_selector == {"kubernetes.io/hostname": node} and pod.spec.node_name == node
    assert any(t.key == "e2e.sparkpoint.dev/dedicated" and t.value == "streaming" for t in pod.spec.tolerations)
    containers = {c.name: c for c in pod.spec.containers}
    assert list(containers) == ["runtime", "gc", "idle-sidecar"]
    runtime = containers["runtime"]
    token = next(e for e in runtime.env if e.name == "E2E_TOKEN")
    assert token.value_from.secret_key_ref.name == SECRET and token.value_from.secret_key_ref.key == "token"
    assert any(m.name == "scratch" and m.mount_path == "/scratch" for m in runtime.volume_mounts)
    assert any(v.name == "scratch" and v.empty_dir is not None for v in pod.spec.volumes)
    assert runtime.command[:2] == ["sparkpoint", "run"] and runtime.readiness_probe is not None
    statuses = {s.name: s for s in pod.status.container_statuses or []}
    assert statuses["idle-sidecar"].state.running is not None, statuses["idle-sidecar"].state
    # The Secret's value is in no object the operator wrote, nor in its log, Events or metrics.
    config_map = jobs.core.read_namespaced_config_map("templated-job", namespace)
    assert SECRET_VALUE not in json.dumps(config_map.data) and SECRET_VALUE not in json.dumps(jobs.get("templated"))
    events = " ".join(e.message or "" for e in jobs.core.list_namespaced_event(namespace).items)
    assert SECRET_VALUE not in events and SECRET_VALUE not in operator.log(tail=5000)
    assert SECRET_VALUE not in (operator.get("/metrics") or "")


@pytest.mark.parametrize(("template", "field"), [
    ({"spec": {"containers": [{"name": "runtime", "command": ["sh"]}]}}, "spec.containers[runtime/gc].command"),
    ({"spec": {"volumes": [{"name": "hot", "emptyDir": {}}]}}, "spec.volumes"),
    ({"metadata": {"labels": {"sparkpoint.dev/job": "other"}}}, "metadata.labels"),
])
def test_a_template_conflicting_with_an_operator_owned_field_is_refused_naming_it(api_client, namespace,
                                                                                    streamingjob_crd, store_env,
                                                                                    template, field):
    jobs = Jobs(api_client, namespace, store_env)
    with pytest.raises(ApiException) as refused:
        jobs.create("conflicting", podTemplate=template)
    assert refused.value.status == 422, refused.value.body
    assert "spec.podTemplate" in refused.value.body and field in refused.value.body, refused.value.body
