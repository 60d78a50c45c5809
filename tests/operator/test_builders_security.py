"""Builders' security shapes (issue 11): the control-token Secret and its mount, the metrics port,
and pods that meet Pod Security "restricted" (the e2e test proves a real API server admits them)."""

from __future__ import annotations

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spec import job as config

JOB = builders.JobRef(namespace="analytics", name="clicks", uid="0d9c0a52-1111-2222-3333-444455556666")
SPEC = config.parse_spec({"image": "sparkpoint:dev", "job": {"entrypoint": "examples.windowed_aggregation:build"},
                          "checkpoint": {"storage": {"url": "s3://ckpt/prod", "secretRef": {"name": "minio-creds"}}}})


def test_control_token_secret_is_owned_named_and_holds_only_the_token() -> None:
    secret = builders.build_control_token_secret(JOB, "tok-123")
    assert secret["kind"] == "Secret" and secret["type"] == "Opaque"
    assert secret["metadata"]["name"] == "clicks-control-token" == builders.control_token_secret_name(JOB)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == JOB.uid
    assert secret["stringData"] == {"token": "tok-123"}


def test_runtime_mounts_the_token_read_only_and_reads_it_from_a_file() -> None:
    pod = builders.build_pod(JOB, SPEC, attempt=1)
    runtime, gc = pod["spec"]["containers"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["control-token"]["secret"]["secretName"] == "clicks-control-token"
    mount = next(m for m in runtime["volumeMounts"] if m["name"] == "control-token")
    assert mount == {"name": "control-token", "mountPath": "/var/run/sparkpoint/control", "readOnly": True}
    assert f"{mount['mountPath']}/token" == builders.CONTROL_TOKEN_FILE
    env = {e["name"]: e for e in runtime["env"]}
    assert env["SPARKPOINT_CONTROL_TOKEN_FILE"]["value"] == builders.CONTROL_TOKEN_FILE
    # The token reaches the GC sidecar in no form, and no container gets it as a literal value.
    assert all(m["name"] != "control-token" for m in gc["volumeMounts"])
    assert "SPARKPOINT_CONTROL_TOKEN" not in {e["name"] for c in (runtime, gc) for e in c["env"]}


def test_runtime_serves_metrics_on_its_own_port_and_the_service_names_it() -> None:
    runtime = builders.build_pod(JOB, SPEC, attempt=1)["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in runtime["ports"]}
    assert ports == {"control": 8080, "metrics": 9091, "spark-ui": 4040}  # spec.spark.ui.enabled by default
    assert runtime["command"][runtime["command"].index("--metrics-port") + 1] == "9091"
    svc_ports = {p["name"]: p["port"] for p in builders.build_service(JOB)["spec"]["ports"]}
    assert svc_ports == {"control": 8080, "metrics": 9091, "gc-metrics": 9090, "spark-ui": 4040}


def test_pod_meets_the_restricted_pod_security_profile() -> None:
    for spec in (SPEC, SPEC.model_copy(update={"gc": config.GcSection(enabled=False)})):
        pod = builders.build_pod(JOB, spec, attempt=1)["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        volumes = {v["name"]: v for v in pod["volumes"]}
        # restricted allows only these volume types
        allowed = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret"}
        assert all(set(v) - {"name"} <= allowed for v in volumes.values())
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["runAsNonRoot"] is True
            assert sc["runAsUser"] != 0 and sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"} and sc["readOnlyRootFilesystem"] is True
            # a writable /tmp (Spark scratch, $HOME) on an emptyDir, since the root is read-only
            tmp = next(m for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
            assert "emptyDir" in volumes[tmp["name"]]
            assert {e["name"]: e.get("value") for e in c["env"]}["HOME"] == "/tmp"


def test_a_service_account_token_only_when_an_account_is_named() -> None:
    pod = builders.build_pod(JOB, SPEC, attempt=1, service_account="clicks-driver")["spec"]
    assert pod["serviceAccountName"] == "clicks-driver" and "automountServiceAccountToken" not in pod
