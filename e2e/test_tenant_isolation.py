"""Issue 41 on the local cluster, the part a driver's token can try without Spark: with the operator
installed by the chart, the token of the drivers' account (`sparkpoint-driver`, what Spark's backend
in a `spark.master: k8s` job's pod holds) is used as a hostile job's code would use it. Every attempt
to leave the job (run a pod as the operator's account, mount a Secret or the host's root, take env
from a Secret, change another pod's image, delete a job's driver pod, read Secrets) is refused by the
API server (the Role or the chart's ValidatingAdmissionPolicy), while the executor pod Spark would
create is admitted. Creates are dry runs: nothing the attempts ask for ever exists. The test names
each attempt and its outcome in its failure message.

The rest of issue 41's attacks need a running hostile job on the real node:
`test_a_hostile_job_reaches_nothing_of_another_tenants_job` (slow) runs one in a second tenant's
namespace against a `spark.master: k8s` job of the first (its hot directory, its Spark driver's ports,
its UI and control API, the chart's History Server).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import socket
import time
import uuid

import pytest
from kube_helpers import exists, python_container, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException
from operator_jobs import BUCKET, SECRET, Jobs

DRIVER_ACCOUNT = "sparkpoint-driver"


@pytest.fixture
def chart_values() -> dict[str, str]:
    return {"driverAdmissionPolicy.enabled": "true"}


@pytest.fixture(autouse=True)
def needs_admission_policies(api_client):
    served = {r.name for r in client.AdmissionregistrationV1Api(api_client).get_api_resources().resources or []}
    if "validatingadmissionpolicies" not in served:
        pytest.skip("the API server serves no ValidatingAdmissionPolicy (the operator warns; docs/security.md)")


def driver_client(api_client: client.ApiClient, core: client.CoreV1Api, namespace: str) -> client.CoreV1Api:
    """A client that authenticates only with the drivers' account token (no client certificate)."""
    wait_for("the drivers' account", lambda: any(
        a.metadata.name == DRIVER_ACCOUNT for a in core.list_namespaced_service_account(namespace).items), timeout=60)
    token = core.create_namespaced_service_account_token(DRIVER_ACCOUNT, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    conf = copy.copy(api_client.configuration)
    conf.cert_file = conf.key_file = None
    conf.username = conf.password = None
    conf.api_key = {"authorization": token}
    conf.api_key_prefix = {"authorization": "Bearer"}
    return client.CoreV1Api(client.ApiClient(conf))


def executor_pod(namespace: str, **change) -> dict:
    """The executor pod Spark's backend creates for job `clicks`, attempt 3 (its pod template's shape)."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "clicks-3-exec-1",
                        "labels": {"spark-role": "executor", "app.kubernetes.io/name": "sparkpoint",
                                   "app.kubernetes.io/component": "executor", "sparkpoint.dev/job": "clicks"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "clicks-3",
                                             "uid": "00000000-0000-0000-0000-000000000003", "controller": True}]},
           "spec": {"automountServiceAccountToken": False, "restartPolicy": "Never",
                    "containers": [{"name": "executor", "image": "sparkpoint/runtime:dev",
                                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}]}}
    for path, value in change.items():
        node = pod
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value
    return pod


def attempt(what: str, call) -> str:
    try:
        call()
    except ApiException as refused:
        return f"{what}: refused {refused.status}"
    return f"{what}: ADMITTED"


def test_a_drivers_token_cannot_leave_its_job(api_client, core, namespace, helm_operator):
    driver = driver_client(api_client, core, namespace)
    # A pod of the job's namespace that is not an executor (here: a stand-in for another job's driver).
    victim = core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="orders-1", labels={"sparkpoint.dev/job": "orders",
                                                              "app.kubernetes.io/component": "runtime"}),
        spec=client.V1PodSpec(containers=[python_container("import time; time.sleep(600)")],
                              termination_grace_period_seconds=1)))

    def create(**change):
        return lambda: driver.create_namespaced_pod(namespace, executor_pod(namespace, **change), dry_run="All")

    secret_volume = [{"name": "tmp", "emptyDir": {}}, {"name": "keys", "secret": {"secretName": "minio-creds"}}]
    root_volume = [{"name": "tmp", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}]
    secret_env = [{"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "minio-creds",
                                                                                   "key": "AWS_SECRET_ACCESS_KEY"}}}]
    outcomes = [
        attempt("run a pod as the operator's account", create(**{
            "spec.serviceAccountName": helm_operator.service_account, "spec.automountServiceAccountToken": True})),
        attempt("mount a ServiceAccount token", create(**{"spec.automountServiceAccountToken": True})),
        attempt("mount a Secret", create(**{"spec.volumes": secret_volume})),
        attempt("mount the host's root", create(**{"spec.volumes": root_volume})),
        attempt("take env from a Secret", create(**{"spec.containers.0.env": secret_env})),
        attempt("create a pod that is no executor", create(**{"metadata.labels": {"app": "miner"}})),
        attempt("patch another job's pod to a new image", lambda: driver.patch_namespaced_pod(
            victim.metadata.name, namespace, {"spec": {"containers": [{"name": "main", "image": "evil:latest"}]}},
            dry_run="All")),
        attempt("delete another job's driver pod", lambda: driver.delete_namespaced_pod(
            victim.metadata.name, namespace, dry_run="All")),
        attempt("read Secrets", lambda: driver.list_namespaced_secret(namespace)),
        attempt("create a Service", lambda: driver.create_namespaced_service(namespace, {
            "metadata": {"name": "leak"}, "spec": {"ports": [{"port": 80}]}}, dry_run="All")),
    ]
    refused = [o for o in outcomes if ": refused" in o]
    assert refused == outcomes, "\n".join(outcomes)
    # The executor Spark would create is admitted: the refusals are the policy's, not a broken token.
    assert attempt("create this job's executor", create()) == "create this job's executor: ADMITTED"


# --- a hostile job on the real node --------------------------------------------------------------------
# Job B's code, shipped as job code is on a cluster without an image of its own: a ConfigMap the pod
# template mounts, on job.pythonPath. At its start it tries to leave its job, writes what happened to
# its own hot directory (the test reads it from the node) and its log, then runs the windowed example.
HOSTILE_CODE = '''
import json, os, socket, urllib.request

HOT = "/var/lib/sparkpoint"


def _try(what, action):
    try:
        result = action()
    except Exception as error:  # every way of failing counts as refused; the test names it
        return [what, f"refused: {type(error).__name__}: {error}"[:240]]
    return [what, f"SUCCEEDED: {result!r}"[:240]]


def _connect(host, port):
    socket.create_connection((host, port), timeout=4).close()
    return "connected"


def _get(url):
    with urllib.request.urlopen(url, timeout=4) as resp:
        return resp.status


def _sees(path, name):
    names = os.listdir(path)
    if name not in names:
        raise FileNotFoundError(f"{name} not among {names}")
    return names


def _write(path):
    with open(path, "w") as out:
        out.write("hostile")
    return path


def build(spark, victim_ip, victim_namespace, victim_dir, host_dir, history, marker, **args):
    own = os.path.join(HOT, os.environ["SPARKPOINT_HOT_VOLUME_SUBPATH"])
    victim = os.path.join(HOT, victim_dir)
    attempts = [
        _try("list the victim's hot dir", lambda: os.listdir(victim)),
        _try("list the victim's hot dir through ..", lambda: os.listdir(os.path.join(own, "..", "..", "..", victim_dir))),
        _try("see the victim's namespace at the hot volume's root", lambda: _sees(HOT, victim_namespace)),
        _try("list the victim's hot dir at its node path", lambda: os.listdir(os.path.join(host_dir, victim_dir))),
        _try("write into the victim's hot dir", lambda: _write(os.path.join(victim, marker))),
        _try("write into the victim's hot dir through ..", lambda: _write(os.path.join(own, "..", "..", "..", victim_dir, marker))),
        _try("create the victim's hot dir and write there", lambda: (os.makedirs(victim, exist_ok=True), _write(os.path.join(victim, marker)))),
        _try("connect to the victim's Spark driver RPC (7078)", lambda: _connect(victim_ip, 7078)),
        _try("connect to the victim's block manager (7079)", lambda: _connect(victim_ip, 7079)),
        _try("GET the victim's Spark UI", lambda: _get(f"http://{victim_ip}:4040/api/v1/applications")),
        _try("GET the victim's control API", lambda: _get(f"http://{victim_ip}:8080/healthz")),
        _try("GET the History Server's applications", lambda: _get(f"http://{history}/api/v1/applications")),
        _try("read a Kubernetes API token", lambda: open("/var/run/secrets/kubernetes.io/serviceaccount/token").read(8)),
    ]
    with open(os.path.join(own, "hostile-attempts.json"), "w") as out:
        json.dump(attempts, out)
    print("HOSTILE-ATTEMPTS " + json.dumps(attempts), flush=True)
    from sparkpoint.examples.windowed_aggregation import build as windowed
    return windowed(spark, **args)
'''
# The victim's input and the failure-free run its output must equal (harness.runtime_job.WindowedJob).
ROWS, KEYS, WINDOW, WATERMARK, TOTAL = 100, 20, 5, 2, 30
HISTORY_PORT = 18080


# Pod Security at its strictest level in both tenant namespaces: what a job may run there is bounded by
# it, as a Deployment's pods are (issue 41's model); a hostPath volume is refused.
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
HOT_CLAIM = "hot-shared"


@pytest.fixture
def tenants(core):
    """Two tenant namespaces beside the operator's own (the `namespace` fixture, its release namespace),
    each enforcing Pod Security `restricted`."""
    names = []
    for tenant in ("a", "b"):
        name = f"e2e-tenant-{tenant}-{uuid.uuid4().hex[:5]}"
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
            name=name, labels={"sparkpoint.dev/e2e": "true", **RESTRICTED})))
        names.append(name)
    for name in names:
        wait_for("the default service account", lambda n=name: exists(
            lambda: core.read_namespaced_service_account("default", n)), timeout=60)
    yield names
    for name in names:
        try:
            core.delete_namespace(name, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.fixture
def shared_claims(core, namespace, tenants):
    """One node directory behind a ReadWriteMany claim in each tenant namespace (a PersistentVolume per
    claim, both over the same directory: an NFS export handed to two namespaces looks like this). Pod
    Security admits claims, so this is what a restricted namespace's jobs can share; the isolation of
    one job's directory from another's is then the operator's sub-path mounts alone."""
    from test_operator_executors import shared_hot_dir

    hot = shared_hot_dir(namespace)
    volumes = []
    for tenant in tenants:
        pv = f"sparkpoint-e2e-hot-{tenant}"
        core.create_persistent_volume(client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=pv, labels={"sparkpoint.dev/e2e": "true"}),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": "1Gi"}, access_modes=["ReadWriteMany"], storage_class_name="",
                persistent_volume_reclaim_policy="Retain",
                host_path=client.V1HostPathVolumeSource(path=str(hot), type="Directory"),
                claim_ref=client.V1ObjectReference(namespace=tenant, name=HOT_CLAIM))))
        volumes.append(pv)
        core.create_namespaced_persistent_volume_claim(tenant, client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name=HOT_CLAIM), spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteMany"], storage_class_name="", volume_name=pv,
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}))))
    for tenant in tenants:
        wait_for(f"{tenant}'s claim bound", lambda t=tenant: core.read_namespaced_persistent_volume_claim(
            HOT_CLAIM, t).status.phase == "Bound", timeout=120, interval=1.0)
    yield hot
    for pv in volumes:
        with contextlib.suppress(ApiException):
            core.delete_persistent_volume(pv)


@pytest.fixture
def tenants_operator(api_client, core, namespace, tenants, streamingjob_crd, peering_crds, store_env):
    """The chart installed in its own namespace watching both tenants, with its NetworkPolicies, the
    drivers' admission policy and its History Server (over the victim's store)."""
    from helm_operator import HelmOperator
    from test_history_server import RUNTIME_IMAGE

    data = {k: base64.b64encode(v.encode()).decode() for k, v in store_env.items()}
    core.create_namespaced_secret(namespace, client.V1Secret(metadata=client.V1ObjectMeta(name=SECRET), data=data))
    repository, tag = RUNTIME_IMAGE.rsplit(":", 1)
    values = {"driverAdmissionPolicy.enabled": "true", "historyServer.enabled": "true",
              "historyServer.storeUrl": f"s3://{BUCKET}/{tenants[0]}", "historyServer.secretName": SECRET,
              "historyServer.image.repository": repository, "historyServer.image.tag": tag,
              "historyServer.port": str(HISTORY_PORT), "historyServer.syncInterval": "5s"}
    op = HelmOperator(api_client, namespace, values, watch=tenants)
    op.install()
    yield op
    try:
        for tenant in tenants:
            with contextlib.suppress(AssertionError):
                Jobs(api_client, tenant, {}).delete_all(timeout=240)
    finally:
        op.uninstall()


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def _refused_pod(jobs: Jobs, name: str, over: dict, image: str) -> str:
    """A job of `over`: refused at admission, or admitted with no pod and a PodCreateFailed Event
    naming Pod Security; anything else is returned as what happened."""
    try:
        jobs.create(name, image=image, **over)
    except ApiException as error:
        return f"refused at admission: {error.status} {json.loads(error.body or '{}').get('message', '')[:160]}"

    def said() -> list[str]:
        return [e.message or "" for e in jobs.core.list_namespaced_event(
            jobs.namespace, field_selector=f"involvedObject.name={name}").items if e.reason == "PodCreateFailed"]
    try:
        messages = wait_for(f"{name}'s PodCreateFailed Event", said, timeout=120, interval=1.0)
    finally:
        pods = [p.metadata.name for p in jobs.core.list_namespaced_pod(
            jobs.namespace, label_selector=f"sparkpoint.dev/job={name}").items]
        with contextlib.suppress(AssertionError, ApiException):
            jobs.delete(name, timeout=120)
    if pods or not any("PodSecurity" in m for m in messages):
        return f"SUCCEEDED? pods {pods}, events {messages}"[:300]
    return f"refused by Pod Security: {messages[0][:200]}"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_hostile_job_reaches_nothing_of_another_tenants_job(api_client, core, namespace, tenants, shared_claims,
                                                               tenants_operator, store_env):
    """Issue 41's hostile job on the real node (kube-router enforcing the chart's and the operator's
    NetworkPolicies): job B in tenant b runs code that tries to read and write job A's directory of
    the hot volume both share, connect to A's Spark driver (RPC and block manager), its UI and
    control API, and the chart's History Server (A's history), and to find an API token. Every
    attempt fails; from the node (exempt from policy) every target answers, so each refusal is
    the isolation's, not a closed port; B checkpoints; A's output equals its failure-free run and
    A's directory holds nothing of B's. Both namespaces enforce Pod Security `restricted`; the hot
    volume both share is a ReadWriteMany claim per namespace over one node directory (shared_claims),
    and B's specs that would reach the node (a hostPath hot volume, the host's network) get no pod."""
    from kube_helpers import real_node
    from test_history_server import RUNTIME_IMAGE, _history_pod
    from test_operator_executors import remove_hot_dir

    from harness.runtime_job import WindowedJob, canonical
    from sparkpoint.runtime.sink.transactional import read_committed
    from sparkpoint.runtime.store import JobRef, open_store

    if not real_node(core):
        pytest.skip("needs the real node with its NetworkPolicy engine (the node agent's pods share the host's network)")
    tenant_a, tenant_b = tenants
    victim_jobs, hostile_jobs = Jobs(api_client, tenant_a, store_env), Jobs(api_client, tenant_b, store_env)
    hot, claim = shared_claims, {"persistentVolumeClaim": {"claimName": HOT_CLAIM}}
    t0 = time.monotonic()
    try:
        victim_jobs.create("victim", image=RUNTIME_IMAGE, **{
            "job.args": {"rows_per_batch": ROWS, "keys": KEYS, "total_batches": TOTAL,
                         "window": f"{WINDOW} seconds", "watermark": f"{WATERMARK} seconds"},
            "spark.master": "k8s", "spark.executors": {"instances": 1, "cores": 1, "memory": "512Mi"},
            "spark.conf": {"spark.kubernetes.executor.request.cores": "100m"},
            "checkpoint.hotVolume": claim})
        st = victim_jobs.wait_status("victim", "Running with a checkpoint", lambda s: s.get("phase") == "Running"
                                     and s.get("latestCheckpoint"), timeout=600, operator=tenants_operator)
        victim_ip = core.read_namespaced_pod(st["pod"], tenant_a).status.pod_ip
        victim_uid = victim_jobs.get("victim")["metadata"]["uid"]
        victim_dir = f"{tenant_a}/victim/{victim_uid}"
        assert (hot / victim_dir).is_dir(), sorted(str(p) for p in hot.rglob("*"))[:20]
        history_ip = _history_pod(core, namespace).status.pod_ip
        targets = {"driver RPC": (victim_ip, 7078), "block manager": (victim_ip, 7079), "Spark UI": (victim_ip, 4040),
                   "control API": (victim_ip, 8080), "History Server": (history_ip, HISTORY_PORT)}
        wait_for("every target listening (seen from the node)", lambda: all(
            _listening(*target) for target in targets.values()), timeout=300, interval=2.0)

        marker = f"hostile-{uuid.uuid4().hex[:6]}"
        core.create_namespaced_config_map(tenant_b, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="hostile-code"), data={"hostile.py": HOSTILE_CODE}))
        hostile_jobs.create("hostile", image=RUNTIME_IMAGE, **{
            "job.entrypoint": "hostile:build", "job.pythonPath": ["/opt/hostile"],
            "job.args": {"victim_ip": victim_ip, "victim_namespace": tenant_a, "victim_dir": victim_dir,
                         "host_dir": str(hot), "history": f"{history_ip}:{HISTORY_PORT}", "marker": marker,
                         "rows_per_batch": 50, "keys": 10},
            "podTemplate": {"spec": {
                "containers": [{"name": "runtime", "volumeMounts": [
                    {"name": "hostile-code", "mountPath": "/opt/hostile", "readOnly": True}]}],
                "volumes": [{"name": "hostile-code", "configMap": {"name": "hostile-code"}}]}},
            "checkpoint.hotVolume": claim})
        hostile_jobs.wait_status("hostile", "Running with a checkpoint of its own", lambda s: s.get("phase") == "Running"
                                 and s.get("latestCheckpoint"), timeout=600, operator=tenants_operator)
        hostile_uid = hostile_jobs.get("hostile")["metadata"]["uid"]
        report = hot / tenant_b / "hostile" / hostile_uid / "hostile-attempts.json"
        outcomes = [f"{what}: {outcome}" for what, outcome in json.loads(report.read_text())]
        assert len(outcomes) == 13 and all(": refused" in o for o in outcomes), "\n".join(outcomes)
        print("\n" + "\n".join(outcomes))
        # Still listening, seen from the node: the refusals above were the policies'.
        assert all(_listening(*target) for target in targets.values())
        assert not [p for p in (hot / tenant_a).rglob(f"{marker}*")], "the hostile job wrote into the victim's dir"

        # What Pod Security adds: B's specs that would reach the node are admitted as StreamingJobs
        # (the operator's host path prefix allows the directory) but get no pod, and B is told why.
        node_specs = {"hostile-hostpath": {"checkpoint.hotVolume": {"hostPath": {"path": str(hot)}}},
                      "hostile-hostnet": {"podTemplate": {"spec": {"hostNetwork": True}}}}
        for name, over in node_specs.items():
            outcomes.append(f"{name}: " + _refused_pod(hostile_jobs, name, over, RUNTIME_IMAGE))
        assert all(": refused" in o for o in outcomes[-2:]), "\n".join(outcomes)
        print("\n".join(outcomes[-2:]))

        done = TOTAL + WINDOW + WATERMARK + 3
        victim_jobs.wait_status("victim", f"a checkpoint past batch {done}", lambda s: s.get("attempt") == 1
                                and (s.get("latestCheckpoint") or {}).get("batch", -1) >= done, timeout=900,
                                operator=tenants_operator)
        rows = read_committed(open_store(f"s3://{BUCKET}/{tenant_a}", env=store_env), JobRef(tenant_a, "victim"))
        want = WindowedJob(rows_per_batch=ROWS, keys=KEYS, total_batches=TOTAL, window_seconds=WINDOW,
                           watermark_seconds=WATERMARK).expected_rows()
        got = canonical(rows)
        assert got == want, (f"missing {sum((want - got).values())}, extra {sum((got - want).values())} "
                             f"of {sum(want.values())} rows")
        print(f"hostile job: every attempt refused; victim's output exact; {time.monotonic() - t0:.0f} s")
    finally:
        for jobs in (hostile_jobs, victim_jobs):
            with contextlib.suppress(AssertionError):
                jobs.delete_all()
        remove_hot_dir(victim_jobs, hot)
