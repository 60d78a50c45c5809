"""The kubectl plugin's pure parts: tables, ages, sizes, patches, argument parsing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import yaml
from kubernetes.client.rest import ApiException

from sparkpoint.plugin import cli
from sparkpoint.plugin import format as fmt

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def _job(name="clicks", ns="team", **status):
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-11-22T10:00:00Z"},
            "spec": {"image": "sparkpoint/runtime:dev", "state": "running"}, "status": status}


@pytest.mark.parametrize(("ts", "expected"), [
    ("2026-11-22T11:59:15Z", "45s"), ("2026-11-22T11:58:01Z", "119s"), ("2026-11-22T11:58:00Z", "2m"), ("2026-11-22T11:50:00Z", "10m"),
    ("2026-11-22T09:00:00+00:00", "3h"), ("2026-11-19T12:00:00Z", "3d"), (None, "<none>"),
    ("2026-11-22T12:00:30Z", "0s"),  # clock skew: never negative
])
def test_age_like_kubectl(ts, expected):
    assert fmt.age(ts, NOW) == expected


@pytest.mark.parametrize(("n", "expected"), [(None, "<none>"), (0, "0B"), (1023, "1023B"), (1536, "1.5KiB"),
                                             (3 * 1024 ** 2, "3.0MiB"), (5 * 1024 ** 4, "5120.0GiB")])
def test_size(n, expected):
    assert fmt.size(n) == expected


def test_list_table_plain_wide_and_all_namespaces():
    jobs = [_job(phase="Running", restarts=2, attempt=3, pod="clicks-3",
                 latestCheckpoint={"id": "chk-000012", "completedAt": "2026-11-22T11:59:50Z"}),
            _job("fresh", phase="Pending")]
    text = fmt.table(*fmt.job_rows(jobs, NOW))
    lines = text.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "CHECKPOINT", "CHECKPOINT-AGE", "RESTARTS", "AGE"]
    assert lines[1].split() == ["clicks", "Running", "chk-000012", "10s", "2", "2h"]
    assert lines[2].split() == ["fresh", "Pending", "<none>", "<none>", "0", "2h"]
    assert lines[0].index("PHASE") == lines[1].index("Running")  # aligned columns
    wide = fmt.table(*fmt.job_rows(jobs, NOW, wide=True, namespaces=True)).splitlines()
    assert wide[0].split()[0] == "NAMESPACE" and wide[0].split()[-4:] == ["STATE", "ATTEMPT", "POD", "IMAGE"]
    assert wide[1].split() == ["team", "clicks", "Running", "chk-000012", "10s", "2", "2h", "running", "3",
                               "clicks-3", "sparkpoint/runtime:dev"]


def test_status_text_names_what_matters():
    job = _job(phase="Running", attempt=2, pod="clicks-2", restarts=1,
               latestCheckpoint={"id": "chk-000007", "batch": 41, "bytes": 2048, "completedAt": "2026-11-22T11:59:00Z"},
               lastFailure={"reason": "PodDeleted", "message": "pod clicks-1 is gone", "at": "2026-11-22T11:00:00Z"},
               conditions=[{"type": "CheckpointHealthy", "status": "True", "reason": "Recent",
                            "lastTransitionTime": "2026-11-22T11:30:00Z"}])
    text = fmt.status_text(job, NOW)
    assert "team/clicks" in text and "chk-000007" in text and "batch 41, 2.0KiB, 60s ago" in text
    assert "PodDeleted: pod clicks-1 is gone (60m ago)" in text
    assert "CheckpointHealthy   True" in text


def test_status_text_shows_the_backoff_wait_while_recovering():
    job = _job(phase="Recovering", nextAttemptAt="2026-11-22T12:00:40Z",
               lastFailure={"reason": "PodFailed", "message": "exit 1", "at": "2026-11-22T11:59:50Z"})
    assert "Next attempt:     in 40s" in fmt.status_text(job, NOW)
    assert "Next attempt" not in fmt.status_text(_job(phase="Running", nextAttemptAt="2026-11-22T12:00:40Z"), NOW)


def test_checkpoints_newest_first_then_savepoints():
    status = {"checkpoints": [{"id": "chk-000001", "batch": 3, "bytes": 10, "newBytes": 10},
                              {"id": "chk-000002", "batch": 5, "bytes": 12, "newBytes": 2}],
              "savepoints": [{"name": "before-upgrade", "batch": 4, "bytes": 11}]}
    headers, rows = fmt.checkpoint_rows(status, NOW)
    assert [r[:2] for r in rows] == [["checkpoint", "chk-000002"], ["checkpoint", "chk-000001"],
                                     ["savepoint", "before-upgrade"]]
    assert rows[0][3:5] == ["12B", "2B"]


def test_render_json_and_yaml_round_trip():
    obj = {"b": 1, "a": [1, {"c": None}]}
    assert json.loads(fmt.render(obj, "json")) == obj
    assert yaml.safe_load(fmt.render(obj, "yaml")) == obj
    with pytest.raises(ValueError, match="-o/--output"):
        fmt.render(obj, "xml")


def test_restore_patch_checkpoint_or_savepoint_and_clear_error():
    assert fmt.restore_patch("chk-000042") == {"spec": {"restoreFrom": {"checkpoint": "chk-000042", "savepoint": None}}}
    assert fmt.restore_patch("before-upgrade") == {
        "spec": {"restoreFrom": {"savepoint": "before-upgrade", "checkpoint": None}}}
    for bad in ("chk-12", "Before_Upgrade", "x" * 64, ""):
        with pytest.raises(ValueError, match="--from"):
            fmt.restore_patch(bad)


def test_savepoint_body():
    body = fmt.savepoint_body("clicks", None)
    assert body["kind"] == "StreamingJobSavepoint" and body["apiVersion"] == "sparkpoint.dev/v1alpha1"
    assert body["metadata"] == {"generateName": "clicks-"} and body["spec"] == {"jobName": "clicks"}
    assert fmt.savepoint_body("clicks", "sp1")["metadata"] == {"name": "sp1"}


@pytest.mark.parametrize("argv", [["-n", "team", "-o", "json", "status", "clicks"],
                                  ["status", "clicks", "-n", "team", "-o", "json"],
                                  ["-n", "team", "status", "-o", "json", "clicks"]])
def test_flags_before_or_after_the_command(argv):
    args = cli.parser().parse_args(argv)
    assert (args.command, args.job, args.namespace, args.output, args.context) == ("status", "clicks", "team",
                                                                                    "json", None)


def test_bad_restore_source_fails_before_any_api_call(capsys):
    assert cli.main(["restore", "clicks", "--from", "Not_A_Name"]) == 2
    assert "--from" in capsys.readouterr().err


def test_rescale_patch_partitions_executors_or_both():
    assert fmt.rescale_patch(2, None) == {"spec": {"spark": {"shufflePartitions": 2}}}
    assert fmt.rescale_patch(None, 3) == {"spec": {"spark": {"executors": {"instances": 3}}}}
    assert fmt.rescale_patch(6, 4) == {"spec": {"spark": {"shufflePartitions": 6, "executors": {"instances": 4}}}}
    with pytest.raises(ValueError, match="--partitions N, --executors N"):
        fmt.rescale_patch(None, None)
    with pytest.raises(ValueError, match="--partitions: .*greater than or equal to 1"):
        fmt.rescale_patch(0, None)
    with pytest.raises(ValueError, match="--executors: .*less than or equal to 1000"):
        fmt.rescale_patch(None, 1001)


def test_bad_rescale_fails_before_any_api_call(capsys):
    assert cli.main(["rescale", "clicks"]) == 2
    assert "--partitions N" in capsys.readouterr().err
    assert cli.main(["-n", "team", "rescale", "clicks", "--partitions", "-1"]) == 2
    assert "--partitions" in capsys.readouterr().err


class _PatchingKube:
    def __init__(self):
        self.patches: list[tuple[str, dict]] = []

    def patch_job(self, name: str, patch: dict) -> dict:
        self.patches.append((name, patch))
        job = _job(name, phase="Upgrading")
        job["spec"]["spark"] = {"shufflePartitions": 2, "executors": {"instances": 3}}
        return job


def test_rescale_patches_the_spec_and_says_what_applies_it(capsys):
    kube = _PatchingKube()
    args = cli.parser().parse_args(["rescale", "clicks", "--partitions", "2", "--executors", "3"])
    assert cli.run(args, kube) == 0
    assert kube.patches == [("clicks", {"spec": {"spark": {"shufflePartitions": 2, "executors": {"instances": 3}}}})]
    out = capsys.readouterr().out
    assert "shufflePartitions = 2, executors.instances = 3" in out and "phase now Upgrading" in out


def test_status_text_shows_the_last_rescale():
    job = _job(phase="Running", lastRescale={"from": 4, "to": 2, "durationSeconds": 1.45, "attempt": 3,
                                             "at": "2026-11-22T11:59:00Z"})
    assert "Last rescale:     4 -> 2 partitions in 1.45s (attempt 3, 60s ago)" in fmt.status_text(job, NOW)
    assert "Last rescale" not in fmt.status_text(_job(phase="Running"), NOW)


class _NonceKube:
    """A job with a resourceVersion; `conflicts` patches are refused as the API server refuses a
    stale precondition (409), and the job changes meanwhile (another client bumped the nonce)."""

    def __init__(self, spec: dict, conflicts: int = 0):
        self.spec, self.version, self.conflicts = spec, 7, conflicts
        self.patches: list[dict] = []

    def job(self, name: str) -> dict:
        return {"metadata": {"name": name, "resourceVersion": str(self.version)}, "spec": self.spec,
                "status": {"phase": "Running"}}

    def patch_job(self, name: str, patch: dict) -> dict:
        self.patches.append(patch)
        if self.conflicts:
            self.conflicts -= 1
            self.version += 1
            self.spec = {**self.spec, "restartNonce": (self.spec.get("restartNonce") or 0) + 1}
            raise ApiException(status=409, reason="Conflict")
        return self.job(name)


def test_nonce_patch_is_one_up_on_the_version_read():
    job = {"metadata": {"resourceVersion": "42"}, "spec": {"restartNonce": 4, "checkpoint": {"interval": "30s"}}}
    assert fmt.nonce_patch(job, "restart") == ({"metadata": {"resourceVersion": "42"},
                                                "spec": {"restartNonce": 5}}, 5)
    assert fmt.nonce_patch(job, "checkpoint") == ({"metadata": {"resourceVersion": "42"},
                                                   "spec": {"checkpoint": {"triggerNonce": 1}}}, 1)
    job["spec"]["checkpoint"]["triggerNonce"] = 9
    assert fmt.nonce_patch(job, "checkpoint")[1] == 10
    # the patch keeps the section's other fields (a merge patch): only the nonce is named
    assert fmt.nonce_patch({"spec": {}}, "checkpoint") == ({"spec": {"checkpoint": {"triggerNonce": 1}}}, 1)


@pytest.mark.parametrize(("command", "field"), [("restart", "spec.restartNonce = 3"),
                                                ("checkpoint", "spec.checkpoint.triggerNonce = 1")])
def test_restart_and_checkpoint_bump_their_nonce_and_say_what_follows(command, field, capsys):
    kube = _NonceKube({"restartNonce": 2})
    assert cli.run(cli.parser().parse_args([command, "clicks"]), kube) == 0
    out = capsys.readouterr().out
    assert f"streamingjob.sparkpoint.dev/clicks {command} requested ({field}, phase now Running)" in out
    assert ("latest checkpoint" if command == "restart" else "CheckpointTriggered") in out
    assert len(kube.patches) == 1 and kube.patches[0]["metadata"] == {"resourceVersion": "7"}


def test_restart_after_a_conflict_reads_the_job_again_and_takes_the_next_nonce(capsys):
    kube = _NonceKube({"restartNonce": 2}, conflicts=1)  # another restart landed between read and patch
    assert cli.run(cli.parser().parse_args(["restart", "clicks"]), kube) == 0
    assert [p["spec"]["restartNonce"] for p in kube.patches] == [3, 4]
    assert kube.patches[1]["metadata"] == {"resourceVersion": "8"}
    assert "spec.restartNonce = 4" in capsys.readouterr().out


def test_restart_gives_up_after_repeated_conflicts():
    kube = _NonceKube({"restartNonce": 2}, conflicts=cli.NONCE_TRIES)
    with pytest.raises(ApiException):
        cli.run(cli.parser().parse_args(["restart", "clicks"]), kube)
    assert len(kube.patches) == cli.NONCE_TRIES
