"""A shared hot volume reaches no further than the job (issue 41): hostPath only under the
operator's allowed prefix, and the job's pods mount only their own <namespace>/<job>/<uid> directory."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparkpoint.operator.kube import builders, hot_confine
from sparkpoint.operator.reconcile import Reconciler
from sparkpoint.runtime.spark import executors
from sparkpoint.runtime.spec import job as config

JOB = builders.JobRef(namespace="team", name="clicks", uid="uid-1")
BASE = {"image": "sparkpoint:dev", "job": {"entrypoint": "m:f"}}


def spec(hot: dict | None, master: str = "k8s"):
    spark = {"master": "k8s", "executors": {"instances": 1}} if master == "k8s" else {}
    return config.parse_spec({**BASE, "spark": spark, "checkpoint": {"hotVolume": hot} if hot else {}})


@pytest.mark.parametrize("path, prefix, refused", [
    ("/var/lib/sparkpoint-hot", None, "hostPath hot volumes are off"),
    ("/", "/srv/hot", "/ is not under the allowed prefix /srv/hot"),
    ("/srv/hot-other", "/srv/hot", "not under the allowed prefix"),
    ("/srv/hot/../../etc", "/srv/hot", "/etc is not under the allowed prefix"),
    ("/srv/hot", "/srv/hot", None),
    ("/srv/hot/team-a", "/srv/hot/", None),
])
def test_host_paths_only_under_the_allowed_prefix(path, prefix, refused) -> None:
    why = hot_confine.host_path_refusal(spec({"hostPath": {"path": path}}), prefix)
    if refused is None:
        assert why is None
    else:
        assert why.startswith("spec.checkpoint.hotVolume.hostPath.path: ") and refused in why
    assert hot_confine.host_path_refusal(spec({"persistentVolumeClaim": {"claimName": "c"}}), None) is None


def test_every_container_of_the_pod_mounts_only_the_jobs_directory_at_its_old_path() -> None:
    run = spec({"persistentVolumeClaim": {"claimName": "shared"}})
    pod = hot_confine.confine_hot_mounts(builders.build_pod(JOB, run, 2), JOB)
    hot_mounts = [m for c in pod["spec"]["containers"] for m in c["volumeMounts"] if m["name"] == "hot"]
    assert len(hot_mounts) == 2  # runtime and gc
    assert all(m == {"name": "hot", "mountPath": f"{builders.HOT_DIR}/team/clicks/uid-1",
                     "subPath": "team/clicks/uid-1"} for m in hot_mounts)
    # the runtime's work dir is inside what it mounts: every path it and Spark use is unchanged
    assert builders.work_dir(JOB, run, 2).startswith(hot_mounts[0]["mountPath"] + "/")
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env[executors.HOT_SUBPATH_ENV] == "team/clicks/uid-1"
    assert hot_confine.HOT_SUBPATH_ENV == executors.HOT_SUBPATH_ENV
    # the pod's own emptyDir (no hotVolume) is left alone
    local = builders.build_pod(JOB, spec(None, master="local"), 1)
    assert hot_confine.confine_hot_mounts(json.loads(json.dumps(local)), JOB) == local


def test_executors_mount_the_same_directory_where_the_driver_has_it(tmp_path) -> None:
    env = {"SPARKPOINT_POD_NAME": "clicks-2", "POD_IP": "10.0.0.2", "SPARKPOINT_ATTEMPT": "2",
           "SPARKPOINT_HOT_VOLUME_PATH": builders.HOT_DIR, "KUBERNETES_SERVICE_HOST": "10.96.0.1",
           "KUBERNETES_SERVICE_PORT": "443", executors.HOT_SUBPATH_ENV: "team/clicks/uid-1"}
    executors.prepare_driver(spec({"persistentVolumeClaim": {"claimName": "shared"}}), "team", "clicks", tmp_path, env)
    template = json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())
    (hot,) = [m for m in template["spec"]["containers"][0]["volumeMounts"] if m["name"] == "hot"]
    assert hot == {"name": "hot", "mountPath": f"{builders.HOT_DIR}/team/clicks/uid-1", "subPath": "team/clicks/uid-1"}


class _Kube:
    def __init__(self):
        self.created, self.status = [], []

    async def apply_config_map(self, body, exists=False):
        pass

    async def create(self, body):
        self.created.append(body)
        return True

    async def patch_status(self, namespace, name, doc, routine=False):
        self.status.append(doc)
        return {"metadata": {"resourceVersion": "2"}, "status": doc}


def test_a_job_on_a_refused_host_path_fails_naming_the_field_and_runs_no_pod() -> None:
    body = {"metadata": {"namespace": "team", "name": "clicks", "uid": "uid-1", "generation": 1,
                         "resourceVersion": "1"},
            "spec": {**BASE, "checkpoint": {"hotVolume": {"hostPath": {"path": "/"}}}}}
    kube, events = _Kube(), []

    class Metrics:
        phases: list = []

        def job_phase(self, namespace, name, phase):
            self.phases.append(phase)
    rec = Reconciler(kube=kube, client=None, metrics=Metrics(), post_event=lambda *a: events.append(a),
                     host_path_prefix="/srv/hot")
    asyncio.run(rec.reconcile("team", "clicks", body=body, pods=[]))
    assert kube.created == [] and Metrics.phases == ["Failed"]
    assert any("/ is not under the allowed prefix /srv/hot" in e[3] for e in events)
    assert rec.deletion.host_path_prefix == "/srv/hot"  # nor does the finalizer mount it for a cleanup
