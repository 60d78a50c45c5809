"""The pod template merge rules (runtime/spec/pod_merge.py, docs/design.md §9) as a table, and the
spec model's refusals of templates that touch what the operator owns."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec.pod_merge import executor_template, merge_pod, scheduling
from sparkpoint.runtime.spec.pod_template import (
    OWNED_ENV,
    OWNED_MOUNT_PATHS,
    OWNED_PORT_NAMES,
    OWNED_PORTS,
    OWNED_VOLUMES,
)

SECURE = {"runAsNonRoot": True, "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}


def ours() -> dict[str, Any]:
    """A pod as the operator builds one (the parts the merge rules speak of)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "j-1", "labels": {"app.kubernetes.io/component": "runtime"},
                         "annotations": {"sparkpoint.dev/attempt": "1"}},
            "spec": {"restartPolicy": "OnFailure", "securityContext": {"runAsNonRoot": True, "fsGroup": 185},
                     "containers": [
                         {"name": "runtime", "image": "img", "command": ["sparkpoint", "run"],
                          "env": [{"name": "HOME", "value": "/tmp"}],
                          "ports": [{"name": "control", "containerPort": 8080}],
                          "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
                          "securityContext": dict(SECURE),
                          "volumeMounts": [{"name": "hot", "mountPath": "/var/lib/sparkpoint"}]},
                         {"name": "gc", "image": "img", "command": ["sparkpoint", "gc"]}],
                     "volumes": [{"name": "hot", "emptyDir": {}}]}}


SECRET_ENV = {"name": "KAFKA_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "kafka", "key": "password"}}}
SIDECAR = {"name": "proxy", "image": "envoy"}

# (what the template says, where to look in the merged pod, what is there)
CASES = [
    ("env added after ours", {"spec": {"containers": [{"name": "runtime", "env": [SECRET_ENV]}]}},
     ("spec", "containers", 0, "env"), [{"name": "HOME", "value": "/tmp"}, SECRET_ENV]),
    ("envFrom added", {"spec": {"containers": [{"name": "runtime", "envFrom": [{"secretRef": {"name": "k"}}]}]}},
     ("spec", "containers", 0, "envFrom"), [{"secretRef": {"name": "k"}}]),
    ("volumeMount added", {"spec": {"containers": [{"name": "runtime",
                                                    "volumeMounts": [{"name": "certs", "mountPath": "/certs"}]}]}},
     ("spec", "containers", 0, "volumeMounts"),
     [{"name": "hot", "mountPath": "/var/lib/sparkpoint"}, {"name": "certs", "mountPath": "/certs"}]),
    ("other resources added, ours kept", {"spec": {"containers": [{"name": "runtime", "resources": {
        "limits": {"nvidia.com/gpu": "1"}, "requests": {"ephemeral-storage": "1Gi"}}}]}},
     ("spec", "containers", 0, "resources"),
     {"requests": {"ephemeral-storage": "1Gi", "cpu": "1", "memory": "2Gi"},
      "limits": {"nvidia.com/gpu": "1", "memory": "2Gi"}}),
    ("a port added", {"spec": {"containers": [{"name": "runtime", "ports": [{"name": "jmx", "containerPort": 5555}]}]}},
     ("spec", "containers", 0, "ports"),
     [{"name": "control", "containerPort": 8080}, {"name": "jmx", "containerPort": 5555}]),
    ("a container field we leave unset is set", {"spec": {"containers": [{"name": "gc", "imagePullPolicy": "Always"}]}},
     ("spec", "containers", 1, "imagePullPolicy"), "Always"),
    ("container securityContext: the keys set replace ours, the others stay",
     {"spec": {"containers": [{"name": "runtime", "securityContext": {"readOnlyRootFilesystem": False}}]}},
     ("spec", "containers", 0, "securityContext"),
     {"runAsNonRoot": True, "readOnlyRootFilesystem": False, "allowPrivilegeEscalation": False}),
    ("pod securityContext likewise", {"spec": {"securityContext": {"runAsUser": 1000}}},
     ("spec", "securityContext"), {"runAsNonRoot": True, "fsGroup": 185, "runAsUser": 1000}),
    ("a sidecar after ours", {"spec": {"containers": [SIDECAR]}},
     ("spec", "containers"), [ours()["spec"]["containers"][0], ours()["spec"]["containers"][1], SIDECAR]),
    ("an init container", {"spec": {"initContainers": [SIDECAR]}}, ("spec", "initContainers"), [SIDECAR]),
    ("a volume after ours", {"spec": {"volumes": [{"name": "certs", "secret": {"secretName": "c"}}]}},
     ("spec", "volumes"), [{"name": "hot", "emptyDir": {}}, {"name": "certs", "secret": {"secretName": "c"}}]),
    ("labels added", {"metadata": {"labels": {"team": "a"}}},
     ("metadata", "labels"), {"team": "a", "app.kubernetes.io/component": "runtime"}),
    ("annotations added", {"metadata": {"annotations": {"prometheus.io/scrape": "true"}}},
     ("metadata", "annotations"), {"prometheus.io/scrape": "true", "sparkpoint.dev/attempt": "1"}),
    ("nodeSelector", {"spec": {"nodeSelector": {"pool": "spark"}}}, ("spec", "nodeSelector"), {"pool": "spark"}),
    ("tolerations", {"spec": {"tolerations": [{"key": "spark", "operator": "Exists"}]}},
     ("spec", "tolerations"), [{"key": "spark", "operator": "Exists"}]),
    ("affinity", {"spec": {"affinity": {"nodeAffinity": {}}}}, ("spec", "affinity"), {"nodeAffinity": {}}),
    ("topologySpreadConstraints", {"spec": {"topologySpreadConstraints": [{"maxSkew": 1}]}},
     ("spec", "topologySpreadConstraints"), [{"maxSkew": 1}]),
    ("priorityClassName", {"spec": {"priorityClassName": "high"}}, ("spec", "priorityClassName"), "high"),
    ("imagePullSecrets", {"spec": {"imagePullSecrets": [{"name": "reg"}]}},
     ("spec", "imagePullSecrets"), [{"name": "reg"}]),
    # What the spec model refuses at admission, the merge never takes either (ours wins):
    ("our command wins", {"spec": {"containers": [{"name": "runtime", "command": ["sh"]}]}},
     ("spec", "containers", 0, "command"), ["sparkpoint", "run"]),
    ("our env name wins", {"spec": {"containers": [{"name": "runtime", "env": [{"name": "HOME", "value": "/"}]}]}},
     ("spec", "containers", 0, "env"), [{"name": "HOME", "value": "/tmp"}]),
    ("our cpu and memory win", {"spec": {"containers": [{"name": "runtime", "resources": {"requests": {"cpu": "9"}}}]}},
     ("spec", "containers", 0, "resources", "requests", "cpu"), "1"),
    ("our volume wins", {"spec": {"volumes": [{"name": "hot", "hostPath": {"path": "/"}}]}},
     ("spec", "volumes"), [{"name": "hot", "emptyDir": {}}]),
    ("our restartPolicy wins", {"spec": {"restartPolicy": "Always"}}, ("spec", "restartPolicy"), "OnFailure"),
    ("our labels win", {"metadata": {"labels": {"app.kubernetes.io/component": "x"}}},
     ("metadata", "labels", "app.kubernetes.io/component"), "runtime"),
]


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@pytest.mark.parametrize(("template", "path", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_merge_rules(template, path, expected) -> None:
    pod, before = ours(), copy.deepcopy(template)
    merged = merge_pod(pod, template)
    assert _at(merged, path) == expected
    assert pod == ours() and template == before  # pure: neither input changes


def test_no_template_is_our_pod() -> None:
    assert merge_pod(ours(), None) == ours() and merge_pod(ours(), {}) == ours()


def test_executors_take_the_runtime_containers_additions_and_not_the_gcs() -> None:
    job = {"spec": {"containers": [{"name": "runtime", "env": [SECRET_ENV]}, {"name": "gc", "env": [SECRET_ENV]},
                                   SIDECAR], "tolerations": [{"key": "k", "operator": "Exists"}]}}
    derived = executor_template(job, None)
    assert derived == {"spec": {"containers": [{"name": "executor", "env": [SECRET_ENV]}, SIDECAR],
                                "tolerations": [{"key": "k", "operator": "Exists"}]}}
    own = {"spec": {"nodeSelector": {"pool": "executors"}}}
    assert executor_template(job, own) == own
    assert executor_template(None, None) is None


def test_the_cleanup_pod_takes_only_the_scheduling_fields() -> None:
    template = {"spec": {"nodeSelector": {"a": "b"}, "tolerations": [{"operator": "Exists"}], "affinity": {"x": {}},
                         "imagePullSecrets": [{"name": "r"}], "priorityClassName": "p", "volumes": [{"name": "v"}],
                         "containers": [SIDECAR], "hostAliases": [{"ip": "1.2.3.4"}]}}
    assert sorted(scheduling(template)) == ["affinity", "imagePullSecrets", "nodeSelector", "priorityClassName",
                                            "tolerations"]
    assert scheduling(None) == {}


def _refusal(template: dict[str, Any], executors: bool = False) -> str:
    spec: dict[str, Any] = {"job": {"entrypoint": "m:f"}}
    if executors:
        spec |= {"spark": {"master": "k8s", "executors": {"instances": 1, "podTemplate": template}},
                 "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "c"}}}}
    else:
        spec["podTemplate"] = template
    with pytest.raises(config.SpecError) as err:
        config.parse_spec(spec)
    return str(err.value)


def _container(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "runtime", **fields}]}}


@pytest.mark.parametrize(("template", "named"), [
    (_container(command=["sh"]), "spec.containers[runtime/gc].command is set by Sparkpoint"),
    (_container(args=["x"]), "spec.containers[runtime/gc].args is set by Sparkpoint"),
    (_container(image="other"), "spec.containers[runtime/gc].image is set by Sparkpoint: set spec.image instead"),
    (_container(livenessProbe={"exec": {"command": ["true"]}}), "spec.containers[runtime/gc].livenessProbe"),
    (_container(readinessProbe={"exec": {"command": ["true"]}}), "spec.containers[runtime/gc].readinessProbe"),
    (_container(env=[{"name": "SPARKPOINT_ATTEMPT", "value": "9"}]), "spec.containers[runtime/gc].env"),
    (_container(env=[{"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}]), "spec.containers[runtime/gc].env"),
    (_container(ports=[{"containerPort": 8080}]), "spec.containers[runtime/gc].ports"),
    (_container(ports=[{"name": "metrics", "containerPort": 1}]), "spec.containers[runtime/gc].ports"),
    (_container(volumeMounts=[{"name": "hot", "mountPath": "/x"}]), "spec.containers[runtime/gc].volumeMounts"),
    (_container(volumeMounts=[{"name": "x", "mountPath": "/tmp"}]), "spec.containers[runtime/gc].volumeMounts"),
    (_container(resources={"limits": {"memory": "9Gi"}}), "spec.containers[runtime/gc].resources"),
    ({"spec": {"containers": [{"name": "gc", "command": ["sh"]}]}}, "spec.containers[runtime/gc].command"),
    ({"spec": {"restartPolicy": "Always"}}, "spec.restartPolicy is set by Sparkpoint"),
    ({"spec": {"serviceAccountName": "x"}}, "spec.serviceAccountName is set by Sparkpoint"),
    ({"spec": {"terminationGracePeriodSeconds": 5}}, "spec.terminationGracePeriodSeconds is set by Sparkpoint"),
    ({"spec": {"volumes": [{"name": "job", "emptyDir": {}}]}}, "spec.volumes: the volume names"),
    ({"spec": {"initContainers": [{"name": "gc"}]}}, "spec.initContainers: the names runtime, gc"),
    ({"metadata": {"labels": {"app.kubernetes.io/instance": "x"}}}, "metadata.labels:"),
    ({"metadata": {"labels": {"sparkpoint.dev/job": "x"}}}, "metadata.labels:"),
    ({"metadata": {"annotations": {"sparkpoint.dev/attempt": "7"}}}, "metadata.annotations:"),
    ({"metadata": {"ownerReferences": []}}, "spec.podTemplate.metadata: metadata: only labels and annotations"),
])
def test_a_template_touching_what_the_operator_owns_is_refused_naming_the_field(template, named) -> None:
    assert named in _refusal(template)


def test_the_executors_template_is_checked_against_the_executor_container() -> None:
    message = _refusal({"spec": {"containers": [{"name": "executor", "workingDir": "/"}]}}, executors=True)
    assert "spec.spark.executors.podTemplate: spec.containers[executor].workingDir is set by Sparkpoint" in message


def test_what_the_operator_owns_is_what_it_sets() -> None:
    """The refusals' lists are the operator's own names (builders.py), so none is missed or stale."""
    from sparkpoint.operator.kube import builders

    job = builders.JobRef("ns", "j", "u")
    spec = config.parse_spec({"job": {"entrypoint": "m:f"}, "spark": {"master": "k8s", "executors": {}},
                              "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "c"}},
                                             "storage": {"url": "s3://bucket/p", "secretRef": {"name": "s"}}}})
    pod = builders.build_pod(job, spec, 1)["spec"]
    containers = pod["containers"]
    assert {v["name"] for v in pod["volumes"]} <= set(OWNED_VOLUMES)
    assert {m["mountPath"] for c in containers for m in c["volumeMounts"]} <= set(OWNED_MOUNT_PATHS)
    assert {p["name"] for c in containers for p in c["ports"]} <= set(OWNED_PORT_NAMES)
    assert {p["containerPort"] for c in containers for p in c["ports"]} <= set(OWNED_PORTS)
    assert all(e["name"] in OWNED_ENV or e["name"].startswith("SPARKPOINT_") for c in containers for e in c["env"])


def test_a_template_differing_only_in_empty_defaults_is_no_template() -> None:
    base = {"job": {"entrypoint": "m:f"}}
    for empty in ({}, {"metadata": {}}, {"spec": {"tolerations": [], "nodeSelector": {}}},
                  {"metadata": {"labels": {}}, "spec": {}}):
        assert config.parse_spec({**base, "podTemplate": empty}).pod_template is None
    # a nested {} means something, and stays
    volume = {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}
    assert config.parse_spec({**base, "podTemplate": volume}).pod_template.document() == volume
