"""spec.podTemplate in the pods the operator and Spark's backend create (docs/design.md §9), and the
Kafka example's SASL credentials from a Secret: they reach the job's code and no object the operator
builds holds them. The merge rules themselves: tests/runtime/test_pod_template.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.operator.kube import builders
from sparkpoint.operator.kube.hot_cleanup import build_cleanup_pod
from sparkpoint.runtime.spark import executors
from sparkpoint.runtime.spec import load_job_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
JOB = builders.JobRef("team", "clicks", "6f1c2d3e-0000-4000-8000-00000000abcd")
SECRET_ENV = {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "spark", "effect": "NoSchedule"}
SIDECAR = {"name": "log-shipper", "image": "fluent-bit:3", "resources": {"limits": {"memory": "64Mi"}}}
TEMPLATE = {"metadata": {"labels": {"team": "growth"}, "annotations": {"cost-center": "42"}},
            "spec": {"containers": [{"name": "runtime", "env": [SECRET_ENV],
                                     "volumeMounts": [{"name": "certs", "mountPath": "/certs", "readOnly": True}]},
                                    SIDECAR],
                     "volumes": [{"name": "certs", "secret": {"secretName": "certs"}}],
                     "tolerations": [TOLERATION], "nodeSelector": {"pool": "spark"},
                     "priorityClassName": "streaming", "imagePullSecrets": [{"name": "registry"}]}}
HOT = {"persistentVolumeClaim": {"claimName": "hot"}}
EXECUTORS = {"spark": {"master": "k8s", "executors": {"instances": 2}}, "checkpoint": {"hotVolume": HOT}}
DRIVER_ENV = {"SPARKPOINT_POD_NAME": "clicks-3", "POD_IP": "10.1.2.3", "SPARKPOINT_ATTEMPT": "3",
              "SPARKPOINT_HOT_VOLUME_PATH": "/var/lib/sparkpoint", "KUBERNETES_SERVICE_HOST": "10.0.0.1",
              "KUBERNETES_SERVICE_PORT": "443"}


def spec(**over: Any):
    return parse_spec({"job": {"entrypoint": "m:f"}, "podTemplate": TEMPLATE, **over})


def test_the_job_pod_has_the_templates_additions_and_keeps_what_the_operator_owns() -> None:
    plain = builders.build_pod(JOB, parse_spec({"job": {"entrypoint": "m:f"}}), 1)
    pod = builders.build_pod(JOB, spec(), 1)
    runtime, gc, sidecar = pod["spec"]["containers"]
    assert (runtime["name"], gc["name"], sidecar) == ("runtime", "gc", SIDECAR)
    assert runtime["env"][-1] == SECRET_ENV and runtime["env"][:-1] == plain["spec"]["containers"][0]["env"]
    for owned in ("command", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext", "image"):
        assert runtime[owned] == plain["spec"]["containers"][0][owned], owned
    assert gc == plain["spec"]["containers"][1]  # the template names only runtime
    assert pod["spec"]["volumes"][-1] == {"name": "certs", "secret": {"secretName": "certs"}}
    assert pod["spec"]["tolerations"] == [TOLERATION] and pod["spec"]["nodeSelector"] == {"pool": "spark"}
    assert pod["spec"]["priorityClassName"] == "streaming"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["metadata"]["labels"] == {**plain["metadata"]["labels"], "team": "growth"}
    assert pod["metadata"]["annotations"] == {**plain["metadata"]["annotations"], "cost-center": "42"}
    assert pod["metadata"]["ownerReferences"] == plain["metadata"]["ownerReferences"]
    assert pod["spec"]["securityContext"] == plain["spec"]["securityContext"]  # restricted, as it was


def test_executors_get_the_job_template_and_their_own_when_it_differs(tmp_path) -> None:
    def written(job_spec) -> dict[str, Any]:
        executors.prepare_driver(job_spec, "team", "clicks", tmp_path, DRIVER_ENV)
        return json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())

    shared = written(spec(**EXECUTORS))
    executor, sidecar = shared["spec"]["containers"]
    assert executor["name"] == "executor" and executor["env"][-1] == SECRET_ENV and sidecar == SIDECAR
    assert shared["spec"]["tolerations"] == [TOLERATION] and shared["metadata"]["labels"]["team"] == "growth"
    assert shared["spec"]["automountServiceAccountToken"] is False  # still the executors' own
    own = {"spec": {"nodeSelector": {"pool": "executors"}}}
    differs = written(spec(spark={"master": "k8s", "executors": {"instances": 2, "podTemplate": own}},
                           checkpoint={"hotVolume": HOT}))
    assert differs["spec"]["nodeSelector"] == {"pool": "executors"} and "tolerations" not in differs["spec"]
    assert [c["name"] for c in differs["spec"]["containers"]] == ["executor"]


def test_the_cleanup_pod_runs_where_the_job_may() -> None:
    pod = build_cleanup_pod(JOB, spec(checkpoint={"hotVolume": HOT}))["spec"]
    assert pod["tolerations"] == [TOLERATION] and pod["nodeSelector"] == {"pool": "spark"}
    assert pod["priorityClassName"] == "streaming" and pod["imagePullSecrets"] == [{"name": "registry"}]
    assert [c["name"] for c in pod["containers"]] == ["cleanup"] and "certs" not in json.dumps(pod)


def _kafka_example():  # type: ignore[no-untyped-def]
    loaded = importlib.util.spec_from_file_location("kafka_to_delta", ROOT / "examples" / "kafka_to_delta.py")
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def _kubelet_env(container: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The environment the kubelet gives a container: values, and Secret keys (an optional one missing: unset)."""
    env = {}
    for var in container.get("env", []):
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        if ref and ref["key"] in secrets.get(ref["name"], {}):
            env[var["name"]] = secrets[ref["name"]][ref["key"]]
        elif "value" in var:
            env[var["name"]] = var["value"]
    return env


def test_the_kafka_examples_sasl_password_reaches_the_job_and_no_object_the_operator_builds() -> None:
    password = 'pa"ss-7c1e9d'  # (a quote: the JAAS value is escaped)
    secrets = {"kafka-sasl": {"username": "svc-clicks", "password": password, "mechanism": "SCRAM-SHA-512"}}
    manifest = yaml.safe_load((ROOT / "examples" / "kafka_to_delta.yaml").read_text())
    job_spec = load_job_spec(ROOT / "examples" / "kafka_to_delta.yaml")
    objects = [builders.build_config_map(JOB, job_spec), builders.build_pod(JOB, job_spec, 1),
               builders.build_service(JOB), manifest]
    assert not any(password in json.dumps(obj) or "svc-clicks" in json.dumps(obj) for obj in objects)
    runtime = objects[1]["spec"]["containers"][0]
    options = _kafka_example().sasl_options(_kubelet_env(runtime, secrets))
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                                 'username="svc-clicks" password="pa\\"ss-7c1e9d";')
    # without the Secret (its keys are optional) the example reads the broker without SASL, as before
    assert _kafka_example().sasl_options(_kubelet_env(runtime, {})) == {}
