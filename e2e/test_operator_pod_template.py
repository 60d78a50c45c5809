"""spec.podTemplate on the cluster (issue 40, docs/design.md §9 "Pod templates"): a job whose template
adds an env var from a Secret, a volume, a toleration, a nodeSelector matching the node, an
annotation and a sidecar runs and checkpoints, and its pod shows each of them (the operator's own
fields as they were); a template that sets an operator-owned field is refused by the API server at
admission, naming the field; `kubectl explain` on the live API server documents the template's fields
as it does a Pod's; a `spark.master: k8s` job's executor pods get spec.spark.executors.podTemplate
(slow). The merge rules themselves are unit-tested (tests/runtime/test_pod_template.py)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time

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


def _explain(path: str) -> tuple[str, set[str]]:
    """`kubectl explain PATH` against the live API server: its DESCRIPTION (whitespace folded) and
    the names under FIELDS."""
    out = subprocess.run(["kubectl", "explain", path], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    description = " ".join(text.split("DESCRIPTION:", 1)[1].split("FIELDS:", 1)[0].split())
    fields = {line.split()[0] for line in text.split("FIELDS:", 1)[1].splitlines()
              if line.startswith("  ") and not line.startswith("   ") and line.strip()}
    return description, fields


def test_kubectl_explain_shows_the_upstream_docs_of_the_pod_template(streamingjob_crd):
    """The CRD carries the upstream PodSpec schema (operator/pod_template_schema.py), so `kubectl
    explain` on the live API server documents the template's fields as it does a Pod's."""
    ours, our_fields = _explain("streamingjob.spec.podTemplate.spec.containers")
    upstream, upstream_fields = _explain("pods.spec.containers")
    assert ours.startswith("List of containers belonging to the pod."), ours
    assert upstream.startswith(ours.split(" A single application")[0]), (ours, upstream)
    assert {"name", "image", "env", "envFrom", "volumeMounts", "resources", "securityContext"} <= our_fields
    missing = upstream_fields - our_fields
    assert len(missing) <= 3, f"fields the API server's Pod has and the template lacks: {sorted(missing)}"
    _, template_fields = _explain("streamingjob.spec.spark.executors.podTemplate.spec")
    assert {"containers", "volumes", "tolerations", "nodeSelector", "affinity"} <= template_fields, template_fields


EXECUTORS_TEMPLATE = {
    "metadata": {"labels": {"e2e-role": "executor-template"},
                 "annotations": {"e2e.sparkpoint.dev/executor-note": "from-the-executors-template"}},
    "spec": {"containers": [{"name": "executor", "env": [{"name": "E2E_EXECUTOR_FLAG", "value": "on"}]}]},
}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_executors_of_a_k8s_job_get_their_own_pod_template(api_client, core, namespace, operator, store_env):
    """spec.spark.executors.podTemplate reaches the executor pods Spark's backend creates (through
    spark.kubernetes.executor.podTemplateFile, which the runtime writes), not the driver; the
    job's spec.podTemplate reaches the driver pod; Spark's and the operator's own fields stay."""
    from test_operator_executors import (
        _driver_account_for_a_process_operator,
        _executors,
        _image,
        _running,
        remove_hot_dir,
        shared_hot_dir,
    )

    _driver_account_for_a_process_operator(api_client, namespace, operator)
    hot = shared_hot_dir(namespace)
    jobs = Jobs(api_client, namespace, store_env)
    try:
        t0 = time.monotonic()
        jobs.create("scaled", image=_image(), podTemplate={"metadata": {"labels": {"e2e-role": "driver-template"}}},
                    **{"spark.master": "k8s",
                       "spark.executors": {"instances": 1, "cores": 1, "memory": "512Mi",
                                           "podTemplate": EXECUTORS_TEMPLATE},
                       "spark.conf": {"spark.kubernetes.executor.request.cores": "100m"},
                       "checkpoint.hotVolume": {"hostPath": {"path": str(hot)}}})
        st = jobs.wait_status("scaled", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                              and s.get("latestCheckpoint"), timeout=600, operator=operator)
        checkpoint_s = time.monotonic() - t0
        (executor,) = _running(_executors(core, namespace, attempt=1))
        assert executor.metadata.labels["e2e-role"] == "executor-template"
        assert executor.metadata.labels["spark-role"] == "executor"  # Spark's own, kept
        assert executor.metadata.labels["sparkpoint.dev/job"] == "scaled"
        assert executor.metadata.annotations["e2e.sparkpoint.dev/executor-note"] == "from-the-executors-template"
        (container,) = executor.spec.containers
        env = {e.name: e.value for e in container.env or []}
        assert env.get("E2E_EXECUTOR_FLAG") == "on", sorted(env)
        assert container.args == ["executor"] and executor.spec.automount_service_account_token is False
        driver = core.read_namespaced_pod(st["pod"], namespace)
        assert driver.metadata.labels["e2e-role"] == "driver-template"
        assert "e2e.sparkpoint.dev/executor-note" not in (driver.metadata.annotations or {})
        assert "E2E_EXECUTOR_FLAG" not in {e.name for c in driver.spec.containers for e in c.env or []}
        print(f"\nexecutors' template: first checkpoint {checkpoint_s:.0f}s after create")
    finally:
        remove_hot_dir(jobs, hot)
