"""Pure builders: a StreamingJob -> the ConfigMap, Pod and Service that run it.

No I/O here: every function takes plain values and returns Kubernetes objects as dicts, so the
shapes are unit-tested without a cluster. client.py applies them idempotently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sparkpoint.runtime.spec import (
    API_GROUP,
    API_VERSION,
    DRIVER_MEMORY_ENV,
    KIND,
    SPARK_UI_PORT,
    SPARK_UI_PORT_ENV,
    SPARK_UI_PROXY_BASE_ENV,
    STANDBY_ENV,
    STANDBY_WARMUP_ENV,
    JobSpec,
    RestoreFrom,
    driver_memory,
    merge_pod,
    parse_duration,
    pod_template_document,
    ui_proxy_base,
)
from sparkpoint.runtime.store import CREDENTIAL_KEYS, ENDPOINT_ENV, REGION_ENV, STS_DURATION_ENV

from ..decisions.runtime_pod import (
    HOT_DIR,
    RUN_AS_USER,
    STANDBY_POINT_ANNOTATION,
    STANDBY_SPEC_ANNOTATION,
    STANDBY_SUFFIX,
)

CONTROL_PORT = 8080
METRICS_PORT = 9091  # the runtime's /metrics alone, so a NetworkPolicy can open it to Prometheus only
GC_METRICS_PORT = 9090
# The control API's bearer token (issue 11): Secret <job>-control-token, key `token`, mounted here.
CONTROL_TOKEN_KEY = "token"
CONTROL_TOKEN_DIR = "/var/run/sparkpoint/control"
CONTROL_TOKEN_FILE = f"{CONTROL_TOKEN_DIR}/{CONTROL_TOKEN_KEY}"
# Pod Security "restricted": a non-root uid (Spark images' usual 185) and a read-only root file
# system; Spark's scratch (spark.local.dir defaults to java.io.tmpdir) and $HOME live in /tmp.
TMP_DIR = "/tmp"
CONFIG_DIR = "/etc/sparkpoint"
JOB_FILE = f"{CONFIG_DIR}/job.json"
# The storage Secret's keys (and spec.gc.secretRef's) are runtime.store's SECRET_KEYS: the
# credentials (required), the S3 endpoint (used when spec.checkpoint.storage.endpoint is not set:
# what a manifest says wins) and AWS_REGION (optional). They reach the containers as env vars only.
ENDPOINT_KEY = ENDPOINT_ENV
# spark.master k8s: the driver's fixed ports and what it reads from its pod's environment
# (runtime/spark/executors.py, which the operator may not import; a test keeps them equal).
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
POD_NAME_ENV = "SPARKPOINT_POD_NAME"
ATTEMPT_ENV = "SPARKPOINT_ATTEMPT"
HOT_VOLUME_PATH_ENV = "SPARKPOINT_HOT_VOLUME_PATH"
# The driver's node on a hostPath hot volume: its executors are pinned there (runtime/spark/executors.py).
NODE_NAME_ENV = "SPARKPOINT_NODE_NAME"


@dataclass(frozen=True)
class JobRef:
    """What the builders need of the custom resource besides its spec."""

    namespace: str
    name: str
    uid: str

    @property
    def owner_reference(self) -> dict[str, Any]:
        return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, "name": self.name,
                "uid": self.uid, "controller": True, "blockOwnerDeletion": True}


def labels(job: JobRef, component: str = "runtime") -> dict[str, str]:
    return {"app.kubernetes.io/name": "sparkpoint", "app.kubernetes.io/instance": job.name,
            "app.kubernetes.io/component": component, "app.kubernetes.io/managed-by": "sparkpoint-operator",
            f"{API_GROUP}/job": job.name}


def _meta(job: JobRef, name: str, component: str = "runtime") -> dict[str, Any]:
    return {"name": name, "namespace": job.namespace, "labels": labels(job, component),
            "ownerReferences": [job.owner_reference]}


def config_map_name(job: JobRef) -> str:
    return f"{job.name}-job"


def pod_name(job: JobRef, attempt: int) -> str:
    # One pod per attempt: a new pod is a new attempt (docs/design.md section 2), so names never clash
    # with a pod that is still terminating.
    return f"{job.name}-{attempt}"


def service_name(job: JobRef) -> str:
    return job.name


def control_token_secret_name(job: JobRef) -> str:
    return f"{job.name}-control-token"


def build_control_token_secret(job: JobRef, token: str) -> dict[str, Any]:
    """Created once per job (kube.create leaves an existing one alone, so the token never changes
    under a running pod); deleted with the StreamingJob through its owner reference."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(job, control_token_secret_name(job)), "stringData": {CONTROL_TOKEN_KEY: token}}


def container_security_context() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def pod_security_context() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER, "fsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"}}


def job_document(spec: JobSpec, restore_from: RestoreFrom | None) -> dict[str, Any]:
    """The spec the runtime reads (a JOB.yaml), with the restore point the operator chose for this
    attempt; None lets the runtime pick (local hot dir if valid, else the latest checkpoint)."""
    doc = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    doc.pop("restoreFrom", None)
    doc.pop("standby", None)  # the operator's alone (the pod's env says standby); an older runtime refuses it
    if restore_from is not None:
        chosen = restore_from.model_dump(by_alias=True, exclude_none=True)
        if chosen:
            doc["restoreFrom"] = chosen
    return doc


PINS_FILE = "gc-pins.json"  # checkpoint ids the GC sidecar keeps beyond retention (the operator's pins)


def build_config_map(job: JobRef, spec: JobSpec, restore_from: RestoreFrom | None = None,
                     pins: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    body = json.dumps(job_document(spec, restore_from), indent=2, sort_keys=True)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(job, config_map_name(job)),
            "data": {"job.json": body, PINS_FILE: pins_document(pins)}}


def pins_document(pins: list[str] | tuple[str, ...]) -> str:
    return json.dumps(sorted(pins))


def _store_env(spec: JobSpec, deletes: bool = False) -> list[dict[str, Any]]:
    """The store's endpoint and credentials; `deletes`: for the GC container, whose credential comes
    from spec.gc.secretRef when set (the runtime's storage Secret may then lack delete rights)."""
    storage = spec.checkpoint.storage
    env: list[dict[str, Any]] = []
    if storage is None:
        return env
    if storage.endpoint:
        env.append({"name": ENDPOINT_KEY, "value": storage.endpoint})
    if storage.sts_duration:
        env.append({"name": STS_DURATION_ENV, "value": str(int(parse_duration(storage.sts_duration)))})
    secret_ref = (spec.gc.secret_ref if deletes else None) or storage.secret_ref
    if secret_ref:
        secret = secret_ref.name
        env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
                for key in CREDENTIAL_KEYS]
        env.append({"name": REGION_ENV, "valueFrom": {"secretKeyRef": {"name": secret, "key": REGION_ENV,
                                                                       "optional": True}}})
        # One entry per name: the API server warns about a name defined twice, and server-side
        # apply may drop one of them.
        if not storage.endpoint:
            env.append({"name": ENDPOINT_KEY, "valueFrom": {"secretKeyRef": {
                "name": secret, "key": ENDPOINT_KEY, "optional": True}}})
    return env


def _common_env(job: JobRef, spec: JobSpec, deletes: bool = False) -> list[dict[str, Any]]:
    return [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HOME", "value": TMP_DIR},  # the root file system is read-only
        {"name": "SPARKPOINT_JOB", "value": f"{job.namespace}/{job.name}"},
        {"name": "SPARKPOINT_JOB_UID", "value": job.uid},
        *_store_env(spec, deletes),
    ]


def _store_url(job: JobRef, spec: JobSpec) -> str:
    storage = spec.checkpoint.storage
    # Without storage the runtime falls back to a directory on the pod's own disk: a demo only.
    return storage.url if storage else f"file://{HOT_DIR}/store"


def standby_pod_name(job: JobRef, attempt: int) -> str:
    """The standby that would become `attempt`: a name of its own, so a cold pod of that attempt
    (`pod_name`) can start while a stale standby is still terminating."""
    return f"{pod_name(job, attempt)}{STANDBY_SUFFIX}"


def work_dir(job: JobRef, spec: JobSpec, attempt: int, standby: bool = False) -> str:
    """The runtime's work dir (the hot dir and what freezes it). On the pod's emptyDir it is the
    same for every attempt; on a shared checkpoint.hotVolume each attempt gets its own directory,
    so an old attempt's executor that outlives its driver can never write into the new attempt's
    checkpoint, and jobs (or a job re-created under the same name) sharing one claim never meet."""
    if spec.checkpoint.hot_volume is None:
        return f"{HOT_DIR}/work"
    # A standby's own directory, so a cold pod of the same attempt never shares it; once promoted it is
    # that attempt's (the runtime's attempt_dirs removes both names for older attempts).
    return f"{HOT_DIR}/{job.namespace}/{job.name}/{job.uid}/attempt-{attempt}{STANDBY_SUFFIX if standby else ''}"


def runtime_container(job: JobRef, spec: JobSpec, attempt: int = 1, standby: bool = False) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/healthz", "port": "control"}, "periodSeconds": 10, "failureThreshold": 6}
    return {
        "name": "runtime",
        "image": spec.image,
        "command": ["sparkpoint", "run", JOB_FILE, "--namespace", job.namespace, "--name", job.name,
                    "--work-dir", work_dir(job, spec, attempt, standby), "--port", str(CONTROL_PORT),
                    "--metrics-port", str(METRICS_PORT),
                    "--external-triggers"],  # the operator triggers; the runtime's timer is its fallback
        "env": [*_common_env(job, spec), {"name": "SPARKPOINT_CONTROL_TOKEN_FILE", "value": CONTROL_TOKEN_FILE},
                # exit 3 names the points it could not restore there (the operator blames exactly those)
                {"name": "SPARKPOINT_TERMINATION_LOG", "value": "/dev/termination-log"},
                # the store fence orders pods by it: a zombie of an older attempt never fences off a newer one
                {"name": ATTEMPT_ENV, "value": str(attempt)},
                # a heap the memory limit holds beside the JVM's and Python's own memory
                {"name": DRIVER_MEMORY_ENV, "value": driver_memory(spec.spark.resources.memory)}],
        "ports": [{"name": "control", "containerPort": CONTROL_PORT},
                  {"name": "metrics", "containerPort": METRICS_PORT}],
        "resources": {"requests": {"cpu": spec.spark.resources.cpu, "memory": spec.spark.resources.memory},
                      "limits": {"memory": spec.spark.resources.memory}},
        # Ready (the query runs) seen within 2 s: the operator starts following the attempt sooner
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "control"}, "periodSeconds": 2},
        "livenessProbe": probe,
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "hot", "mountPath": HOT_DIR},
                         {"name": "job", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "control-token", "mountPath": CONTROL_TOKEN_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": TMP_DIR}],
    }


def _with_ui(container: dict[str, Any], job: JobRef, ui_path_prefix: str | None) -> None:
    """spec.spark.ui.enabled: Spark's live UI on the fixed `spark-ui` port (the runtime turns the UI
    on only when this env var names the port); behind the chart's Ingress, its path there."""
    container["ports"].append({"name": "spark-ui", "containerPort": SPARK_UI_PORT})
    container["env"].append({"name": SPARK_UI_PORT_ENV, "value": str(SPARK_UI_PORT)})
    if ui_path_prefix:
        container["env"].append({"name": SPARK_UI_PROXY_BASE_ENV,
                                 "value": ui_proxy_base(ui_path_prefix, job.namespace, job.name)})


# The GC sidecar's memory limit unless spec.gc.memory names one (docs/design.md §7, measured in
# docs/benchmarks.md "GC sidecar memory"): about 46 MiB plus 2.6 KiB per state file of a retained
# checkpoint, so 512Mi covers about 180,000 files at any age; a delta sink's compaction records still make
# every output pass full and growing with age (146 MiB at a day): 768Mi is room for that, not a bound.
GC_MEMORY_LIMIT = "512Mi"
GC_MEMORY_LIMIT_DELTA = "768Mi"


def gc_memory_limit(spec: JobSpec) -> str:
    if spec.gc.memory is not None:
        return spec.gc.memory
    return GC_MEMORY_LIMIT_DELTA if spec.job.sink.kind == "delta" else GC_MEMORY_LIMIT


def gc_container(job: JobRef, spec: JobSpec) -> dict[str, Any]:
    gc = spec.gc
    return {
        "name": "gc",
        "image": spec.image,
        "command": ["sparkpoint", "gc", "--store", _store_url(job, spec), "--job", f"{job.namespace}/{job.name}",
                    "--retain", str(spec.checkpoint.retain), "--grace", gc.grace,
                    "--pending-timeout", gc.pending_timeout, "--interval", gc.interval,
                    # only where it matters: an older job image's gc refuses the flag
                    *(["--delta-retention", gc.delta_retention] if spec.job.sink.kind == "delta" else []),
                    "--pins-file", f"{CONFIG_DIR}/{PINS_FILE}",
                    # Event logs (history/) are collected even with spark.eventLog.enabled false:
                    # the logs of the attempts before the switch go with retention too.
                    "--history-retain", str(spec.spark.event_log.retain_attempts),
                    "--metrics-port", str(GC_METRICS_PORT), "--json"],
        "env": _common_env(job, spec, deletes=True),
        "ports": [{"name": "gc-metrics", "containerPort": GC_METRICS_PORT}],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": gc_memory_limit(spec)}},
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "hot", "mountPath": HOT_DIR}, {"name": "gc-tmp", "mountPath": TMP_DIR},
                         {"name": "job", "mountPath": CONFIG_DIR, "readOnly": True}],
    }


def hot_volume_source(spec: JobSpec) -> dict[str, Any]:
    """The hot dir's volume: the pod's own emptyDir, or checkpoint.hotVolume, which the driver and
    its executors mount at the same path (Spark hands executors absolute checkpoint paths)."""
    hot = spec.checkpoint.hot_volume
    return hot.volume_source() if hot else {"emptyDir": {}}


def _as_driver(container: dict[str, Any], attempt: int) -> None:
    """spark.master k8s: the runtime is Spark's driver in client mode. Executors connect to its pod
    IP on fixed ports; Spark names the executors after this pod and owns them through it."""
    container["ports"] += [{"name": "spark-driver", "containerPort": DRIVER_PORT},
                           {"name": "spark-blocks", "containerPort": BLOCK_MANAGER_PORT}]
    container["env"] += [{"name": POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                         {"name": HOT_VOLUME_PATH_ENV, "value": HOT_DIR}]


def build_pod(job: JobRef, spec: JobSpec, attempt: int, service_account: str | None = None,
              driver_service_account: str | None = None, ui_path_prefix: str | None = None,
              standby: bool = False) -> dict[str, Any]:
    containers = [runtime_container(job, spec, attempt, standby)]
    driver = spec.spark.master == "k8s"
    if driver:
        _as_driver(containers[0], attempt)
        hot = spec.checkpoint.hot_volume
        if hot is not None and hot.host_path is not None:  # one node's disk: executors go where the driver is
            containers[0]["env"].append({"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    if spec.spark.ui.enabled:
        _with_ui(containers[0], job, ui_path_prefix)
    if spec.gc.enabled:
        containers.append(gc_container(job, spec))
    meta = _meta(job, standby_pod_name(job, attempt) if standby else pod_name(job, attempt))
    meta["annotations"] = {f"{API_GROUP}/attempt": str(attempt)}
    pod_spec: dict[str, Any] = {
        # The kubelet restarts a crashed container in place: the fast local-recovery path (the hot
        # dir emptyDir survives it). Exit 0 means stopped on request, so it is not restarted; the
        # operator starts a new attempt (a new pod) when the pod itself is lost or gives up.
        "restartPolicy": "Never" if spec.restart.policy == "Never" else "OnFailure",
        "terminationGracePeriodSeconds": 60,
        "containers": containers,
        "securityContext": pod_security_context(),
        "volumes": [{"name": "hot", **hot_volume_source(spec)},
                    {"name": "job", "configMap": {"name": config_map_name(job)}},
                    {"name": "control-token", "secret": {"secretName": control_token_secret_name(job),
                                                         "defaultMode": 0o440}},
                    {"name": "tmp", "emptyDir": {}}],
    }
    if spec.gc.enabled:
        pod_spec["volumes"].append({"name": "gc-tmp", "emptyDir": {"sizeLimit": "256Mi"}})
    if driver:  # Spark's backend starts, watches and deletes executor pods with this account's token
        if driver_service_account:
            pod_spec["serviceAccountName"] = driver_service_account
        pod_spec["automountServiceAccountToken"] = True
    elif spec.service_account_name:  # the job's own identity (its store credentials): no API token
        pod_spec["serviceAccountName"] = spec.service_account_name
        pod_spec["automountServiceAccountToken"] = False
    elif service_account:
        pod_spec["serviceAccountName"] = service_account
    else:  # the runtime and the GC talk to no Kubernetes API: no token in the pod
        pod_spec["automountServiceAccountToken"] = False
    # spec.podTemplate: the user's additions, by the merge rules of docs/design.md §9
    return merge_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec},
                     pod_template_document(spec.pod_template))


def build_standby_pod(job: JobRef, spec: JobSpec, attempt: int, spec_key: str, point: str | None,
                      service_account: str | None = None, driver_service_account: str | None = None,
                      ui_path_prefix: str | None = None) -> dict[str, Any]:
    """The standby that would be promoted as `attempt` (docs/design.md §11, "Standby attempts"): the
    attempt's pod (same spec, token, ConfigMap, labels, owner) with its own name and work dir,
    SPARKPOINT_STANDBY=true (the runtime follows the store until POST /promote; its /readyz stays 503
    until then, which keeps it out of the job Service's endpoints), the spec key and restore point it
    was started for, and a preferred anti-affinity to the job's other runtime pods: another node where
    one exists, so losing the active pod's node does not take the standby with it."""
    pod = build_pod(job, spec, attempt, service_account, driver_service_account, ui_path_prefix, standby=True)
    pod["metadata"]["annotations"].update({STANDBY_SPEC_ANNOTATION: spec_key, STANDBY_POINT_ANNOTATION: point or ""})
    runtime = next(c for c in pod["spec"]["containers"] if c["name"] == "runtime")
    runtime["env"].append({"name": STANDBY_ENV, "value": "true"})
    if spec.standby is not None and spec.standby.warmup:
        runtime["env"].append({"name": STANDBY_WARMUP_ENV, "value": "true"})
    affinity = pod["spec"].setdefault("affinity", {})
    preferred = affinity.setdefault("podAntiAffinity", {}).setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    preferred.append({"weight": 100, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {f"{API_GROUP}/job": job.name, "app.kubernetes.io/component": "runtime"}}}})
    return pod


def build_service(job: JobRef) -> dict[str, Any]:
    """Headless: DNS names the job's pod and Prometheus may discover it, but no virtual IP is
    allocated (the operator talks to a runtime by pod IP; ClusterIP allocation is serialized in the
    API server and was the slowest call of a 1,000-job ramp, docs/benchmarks.md)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(job, service_name(job)),
        "spec": {"clusterIP": "None",
                 "selector": {f"{API_GROUP}/job": job.name, "app.kubernetes.io/component": "runtime"},
                 "ports": [{"name": "control", "port": CONTROL_PORT, "targetPort": "control"},
                           {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"},
                           {"name": "gc-metrics", "port": GC_METRICS_PORT, "targetPort": "gc-metrics"},
                           # Always listed: the Service is created once per job, and spec.spark.ui
                           # may change later; a pod without the UI just has no such port.
                           {"name": "spark-ui", "port": SPARK_UI_PORT, "targetPort": "spark-ui"}]},
    }
