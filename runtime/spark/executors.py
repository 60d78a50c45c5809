"""The driver side of `spark.master: k8s`: the runtime's pod is Spark's driver in client mode and
Spark's Kubernetes backend starts the executor pods (docs/design.md §9).

Pure functions turn the spec and what the operator put in the driver pod's environment into Spark
settings and the executors' pod template; `prepare_driver` writes the template and returns the
settings. The runtime talks to no Kubernetes API itself: Spark's backend does, with the driver
pod's ServiceAccount token (the chart grants it exactly what the backend calls).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.runtime.spec import (
    API_GROUP,
    ExecutorsSpec,
    HotVolume,
    JobSpec,
    executor_template,
    merge_pod,
    parse_duration,
    parse_quantity,
    pinned_to_node,
    pod_template_document,
)
from sparkpoint.runtime.spec.pod_template import EXECUTOR_CONTAINERS

# Fixed, so the driver pod can declare them and a NetworkPolicy can open them to its executors
# (Spark's own defaults would be random ports). Executors connect to the driver's pod IP.
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
EXECUTOR_CONTAINER = EXECUTOR_CONTAINERS[0]
# The runtime image's uid (operator/kube/builders.py RUN_AS_USER): executors pass Pod Security
# `restricted` like the driver.
RUN_AS_USER = 185
TMP_DIR = "/tmp"
TEMPLATE_FILE = "executor-pod-template.json"

# What the operator sets in a k8s driver pod besides POD_IP (operator/kube/builders.py).
POD_NAME_ENV = "SPARKPOINT_POD_NAME"
ATTEMPT_ENV = "SPARKPOINT_ATTEMPT"
HOT_VOLUME_PATH_ENV = "SPARKPOINT_HOT_VOLUME_PATH"
# spark.authenticate (issue 41): the job's own Secret (made by the operator) holds the shared secret,
# mounted at SPARK_AUTH_FILE in the driver and every executor; never an env value in a pod spec.
SPARK_AUTH_SECRET_ENV = "SPARKPOINT_SPARK_AUTH_SECRET"
# The job's own <namespace>/<job>/<uid> directory of the hot volume, the only part its pods mount.
HOT_SUBPATH_ENV = "SPARKPOINT_HOT_VOLUME_SUBPATH"
# The node the driver pod runs on (the downward API's spec.nodeName): on a hostPath hot volume the
# executors must run there too, the only node whose disk holds the job's directory.
NODE_NAME_ENV = "SPARKPOINT_NODE_NAME"
SPARK_AUTH_DIR = "/var/run/sparkpoint/spark-auth"
SPARK_AUTH_FILE = f"{SPARK_AUTH_DIR}/secret"


@dataclass(frozen=True)
class DriverPod:
    namespace: str
    job: str
    attempt: str
    pod_name: str
    pod_ip: str
    api_server: str  # https://host:port of the in-cluster API server
    hot_mount: str  # where checkpoint.hotVolume is mounted, in the driver and in every executor
    auth_secret: str | None = None  # the Secret holding spark.authenticate's secret (None: an older operator)
    hot_subpath: str | None = None  # the job's directory of the hot volume (None: an older operator)
    node: str | None = None  # the driver pod's node (None: an older operator, or not a hostPath job)
    start: int | None = None  # the runtime's start (its claim number in attempts/, docs/design.md §5)


def driver_from_env(env: Mapping[str, str], namespace: str, job: str, start: int | None = None) -> DriverPod:
    """The driver's facts from its pod's environment; a missing one is named (the runtime was not
    started by the operator, or not in a pod)."""
    names = [POD_NAME_ENV, "POD_IP", ATTEMPT_ENV, HOT_VOLUME_PATH_ENV, "KUBERNETES_SERVICE_HOST",
             "KUBERNETES_SERVICE_PORT"]
    missing = [name for name in names if not env.get(name)]
    if missing:
        raise ValueError(f"spark.master k8s runs in a pod started by the operator; missing {', '.join(missing)}")
    host = env["KUBERNETES_SERVICE_HOST"]
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return DriverPod(namespace=namespace, job=job, attempt=env[ATTEMPT_ENV], pod_name=env[POD_NAME_ENV],
                     pod_ip=env["POD_IP"], api_server=f"https://{host}:{env['KUBERNETES_SERVICE_PORT']}",
                     hot_mount=env[HOT_VOLUME_PATH_ENV], auth_secret=env.get(SPARK_AUTH_SECRET_ENV) or None,
                     hot_subpath=env.get(HOT_SUBPATH_ENV) or None, node=env.get(NODE_NAME_ENV) or None,
                     start=start)


def executor_labels(driver: DriverPod) -> dict[str, str]:
    """Spark adds spark-role=executor and its own ids; these let the operator, the plugin and
    kubectl find a job's executors by attempt. The component is not `runtime`, so the job's
    Service and the operator's pod index (both select component=runtime) never see them."""
    labels = {"app.kubernetes.io/name": "sparkpoint", "app.kubernetes.io/instance": driver.job,
              "app.kubernetes.io/component": "executor", f"{API_GROUP}/job": driver.job,
              f"{API_GROUP}/attempt": driver.attempt}
    if driver.start is not None:  # which start of the runtime made them (earlier_executors.py)
        labels[START_LABEL] = str(driver.start)
    return labels


START_LABEL = f"{API_GROUP}/start"
# Spark (4.3.0's Config.isValidExecutorPodNamePrefix) wants a DNS-1123 subdomain with room for
# "-exec-<Int.MaxValue>" within 253 characters. Kept stricter: every executor name a DNS label of at
# most 63 (a pod's hostname, a label value), so a prefix of 63 - len("-exec-") - 10 = 47, no dots.
PREFIX_MAX = 47
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def executor_pod_prefix(pod_name: str, start: int | None) -> str:
    """`<driver pod>-s<start>`: unique per start of the runtime, so an in-place restart's executors
    never take the names of a crashed start's executors, which may still be running. A driver pod
    name too long for Spark keeps its head and gains a digest of the whole name (the start stays
    readable at the end); dots (allowed in a job name, not in Spark's prefix) become dashes."""
    name = pod_name.replace(".", "-")
    suffix = f"-s{start}" if start is not None else ""
    if len(name) + len(suffix) > PREFIX_MAX:
        digest = hashlib.sha256(pod_name.encode()).hexdigest()[:8]
        name = f"{name[:PREFIX_MAX - len(suffix) - len(digest) - 1].rstrip('-')}-{digest}"
    prefix = name + suffix
    if not _DNS_LABEL.fullmatch(prefix):  # a pod name the API server accepted always gives one
        raise ValueError(f"cannot make an executor pod name prefix of {pod_name!r}")
    return prefix


def spark_memory(quantity: str) -> str:
    """A Kubernetes quantity as Spark reads memory (whole MiB: Spark's units are binary)."""
    return f"{int(parse_quantity(quantity)) // 2**20}m"


def driver_conf(spec: JobSpec, driver: DriverPod, template_path: str) -> dict[str, str]:
    executors = spec.spark.executors
    if executors is None:  # the spec model refuses master k8s without executors
        raise ValueError("spark.master k8s needs spark.executors")
    conf = {
        "spark.master": f"k8s://{driver.api_server}",
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": driver.namespace,
        # Executors get an owner reference to this pod: deleting the driver (a lost or replaced
        # attempt) makes the garbage collector delete its executors.
        "spark.kubernetes.driver.pod.name": driver.pod_name,
        # <job>-<attempt>-s<start>-exec-<n>: a restarted runtime's executors never reuse a name
        "spark.kubernetes.executor.podNamePrefix": executor_pod_prefix(driver.pod_name, driver.start),
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.executor.podTemplateFile": template_path,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.driver.host": driver.pod_ip,
        "spark.driver.bindAddress": driver.pod_ip,
        "spark.driver.port": str(DRIVER_PORT),
        "spark.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.executor.cores": str(executors.cores),
        "spark.executor.memory": spark_memory(executors.memory),
        **allocation_conf(executors),
    }
    conf.update({f"spark.kubernetes.executor.label.{k}": v for k, v in executor_labels(driver).items()})
    if driver.auth_secret:
        conf.update(auth_conf())
    if executors.dynamic is not None:
        # A finished batch's shuffle files keep an otherwise idle executor until the driver's garbage
        # collection lets Spark's cleaner drop them (Spark's own timeout: never; on a quiet machine
        # that was over 5 minutes). A streaming batch never reads an older batch's shuffle, so they
        # go after idleTimeout like the executor. A value in spec.spark.conf wins.
        conf[SHUFFLE_TRACKING_TIMEOUT] = spec.spark.conf.get(
            SHUFFLE_TRACKING_TIMEOUT, conf["spark.dynamicAllocation.executorIdleTimeout"])
    return conf


SHUFFLE_TRACKING_TIMEOUT = "spark.dynamicAllocation.shuffleTracking.timeout"


def auth_conf() -> dict[str, str]:
    """Spark's RPC authenticated with the job's own secret and encrypted, shuffle and spill files
    encrypted: no other pod can register as an executor of this driver or fetch its blocks. With the
    executor file set Spark puts no SPARK_AUTH_SECRET value in the executor pods' spec. The generic
    file too: an executor's first connection (the driver-properties fetch, before its SparkEnv
    exists) uses a SecurityManager that reads only spark.authenticate.secret.file, and without it
    every executor fails with "A secret key must be specified" (found on the real node)."""
    return {"spark.authenticate": "true",
            "spark.authenticate.secret.file": SPARK_AUTH_FILE,
            "spark.authenticate.secret.driver.file": SPARK_AUTH_FILE,
            "spark.authenticate.secret.executor.file": SPARK_AUTH_FILE,
            "spark.network.crypto.enabled": "true",
            "spark.io.encryption.enabled": "true"}


def allocation_conf(executors: ExecutorsSpec) -> dict[str, str]:
    """A fixed executor count, or Spark's dynamic allocation with shuffle tracking (Kubernetes has
    no external shuffle service): executors added while tasks wait, released after idleTimeout
    without a task, between min and max. An executor that holds shuffle files is kept until Spark's
    cleaner drops them or spark.dynamicAllocation.shuffleTracking.timeout passes (driver_conf sets it
    to idleTimeout unless spec.spark.conf does)."""
    dynamic = executors.dynamic
    if dynamic is None:
        return {"spark.executor.instances": str(executors.instances)}
    return {"spark.dynamicAllocation.enabled": "true",
            "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.minExecutors": str(dynamic.min),
            "spark.dynamicAllocation.maxExecutors": str(dynamic.max),
            # Spark reads this one in whole seconds ("1500ms" would be 1 s): rounded up
            "spark.dynamicAllocation.executorIdleTimeout": f"{math.ceil(parse_duration(dynamic.idle_timeout))}s"}


def executor_pod_template(driver: DriverPod, hot_volume: HotVolume) -> dict[str, Any]:
    """What Spark's backend builds every executor pod on: the restricted security context of the
    driver's pod, /tmp as an emptyDir under a read-only root (also the working directory, where an
    executor fetches the job's jars and files), and the hot volume at the driver's mount path, since
    Spark hands executors absolute paths into the checkpoint location."""
    container_security = {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                          "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                          "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    hot_mount: dict[str, str] = {"name": "hot", "mountPath": driver.hot_mount}
    if driver.hot_subpath:  # only the job's own directory of the volume, where the driver has it
        hot_mount = {"name": "hot", "mountPath": f"{driver.hot_mount}/{driver.hot_subpath}",
                     "subPath": driver.hot_subpath}
    template: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": executor_labels(driver)},
        "spec": {
            "automountServiceAccountToken": False,  # executors call no Kubernetes API
            "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                                "fsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": EXECUTOR_CONTAINER,
                "workingDir": TMP_DIR,
                "env": [{"name": "HOME", "value": TMP_DIR}],
                "securityContext": container_security,
                "volumeMounts": [{"name": "tmp", "mountPath": TMP_DIR}, hot_mount],
            }],
            "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "hot", **hot_volume.volume_source()}],
        },
    }
    if driver.auth_secret:
        _with_auth_secret(template, driver.auth_secret)
    return template


def _with_auth_secret(template: dict[str, Any], secret: str) -> None:
    template["spec"]["volumes"].append({"name": "spark-auth", "secret": {"secretName": secret, "defaultMode": 0o440}})
    template["spec"]["containers"][0]["volumeMounts"].append(
        {"name": "spark-auth", "mountPath": SPARK_AUTH_DIR, "readOnly": True})


def user_executor_template(spec: JobSpec) -> dict[str, Any] | None:
    """spark.executors.podTemplate, else what executors take of spec.podTemplate (spec/pod_merge.py)."""
    executors = spec.spark.executors
    return executor_template(pod_template_document(spec.pod_template),
                             pod_template_document(executors.pod_template if executors else None))


def prepare_driver(spec: JobSpec, namespace: str, job: str, work_dir: Path, env: Mapping[str, str],
                   start: int | None = None) -> dict[str, str]:
    """Write the executors' pod template into the work dir and return the driver's Spark settings.
    start: the runtime's claim number (names and labels this start's executors)."""
    driver = driver_from_env(env, namespace, job, start)
    hot_volume = spec.checkpoint.hot_volume
    if hot_volume is None:  # the spec model refuses executors without one
        raise ValueError("spark.executors needs checkpoint.hotVolume")
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / TEMPLATE_FILE
    template = merge_pod(executor_pod_template(driver, hot_volume), user_executor_template(spec), EXECUTOR_CONTAINERS)
    if driver.node and hot_volume.host_path is not None:  # the one node whose disk holds the job's directory
        template = pinned_to_node(template, driver.node)
    path.write_text(json.dumps(template, indent=2))  # JSON is YAML
    return driver_conf(spec, driver, str(path))
