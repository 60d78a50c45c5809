"""Pure functions of the node agent: pod phase and status, restart policy and backoff,
env and argv mapping (including the image-name rule), mounts, and pod IP allocation."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from agent import AddressPool
from hypothesis import given
from hypothesis import strategies as st
from podspec import ConfigError, build_env, expand, image_entrypoint, mounts_for, resolve_argv
from status import ContainerRecord, Terminated, backoff_seconds, pod_phase, pod_status, should_restart

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"
POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "x"}},
       "spec": {"nodeName": "n", "serviceAccountName": "sa", "containers": []}}


def record(name="main", running=False, exit_code=None, started=True) -> ContainerRecord:
    r = ContainerRecord(name, "img", ever_started=started)
    if running:
        r.running_since = T0
    if exit_code is not None:
        r.terminated = Terminated(exit_code, "Error" if exit_code else "Completed", T0, T1)
    return r


@pytest.mark.parametrize(("policy", "codes", "phase"), [
    ("Never", [0, 0], "Succeeded"), ("Never", [0, 1], "Failed"), ("OnFailure", [0, 1], "Running"),
    ("OnFailure", [0, 0], "Succeeded"), ("Always", [0, 0], "Running"), ("Always", [1], "Running"),
])
def test_phase_when_all_containers_stopped(policy, codes, phase):
    # A container that will be restarted keeps the pod Running, even between exit and restart.
    assert pod_phase([], [record(exit_code=c) for c in codes], policy, True) == phase


def test_phase_pending_before_any_start_and_running_while_one_runs():
    assert pod_phase([], [record(started=False)], "Always", True) == "Pending"
    assert pod_phase([], [record(running=True), record("b", exit_code=1)], "Never", True) == "Running"
    assert pod_phase([record("init", exit_code=1)], [record(started=False)], "Never", False) == "Failed"
    assert pod_phase([record("init", running=True)], [record(started=False)], "Never", False) == "Pending"


@given(st.sampled_from(["Always", "OnFailure", "Never"]), st.integers(0, 255))
def test_should_restart_matches_policy(policy, code):
    assert should_restart(policy, code) == (policy == "Always" or (policy == "OnFailure" and code != 0))


@given(st.integers(0, 50), st.floats(0.1, 20), st.floats(1, 600))
def test_backoff_doubles_and_is_capped(count, base, cap):
    delay = backoff_seconds(count, base, cap)
    assert 0 < delay <= cap
    assert delay == min(cap, base * 2 ** count)


def test_status_reports_restarts_last_state_and_keeps_transition_times():
    main = record(running=True)
    main.restart_count, main.ready = 2, True
    main.last_terminated = Terminated(3, "Error", T0, T1)
    first = pod_status([], [main], "Always", True, "127.1.0.7", "127.0.0.1", T0, T0)
    assert first["phase"] == "Running" and first["podIP"] == "127.1.0.7"
    status = first["containerStatuses"][0]
    assert status["restartCount"] == 2 and status["lastState"]["terminated"]["exitCode"] == 3
    assert status["state"] == {"running": {"startedAt": T0}}
    ready = {c["type"]: c for c in first["conditions"]}["Ready"]
    assert ready["status"] == "True"
    later = pod_status([], [main], "Always", True, "127.1.0.7", "127.0.0.1", T0, T1, first["conditions"])
    assert {c["type"]: c for c in later["conditions"]}["Ready"]["lastTransitionTime"] == T0


@given(st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), st.text(max_size=10), max_size=4),
       st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True))
def test_expand_substitutes_defined_and_keeps_undefined(env, name):
    text = f"a$({name})b$$({name})c"
    expected_middle = env.get(name, f"$({name})")
    assert expand(text, env) == f"a{expected_middle}b$({name})c"


@pytest.mark.parametrize(("image", "entrypoint"), [
    ("sparkpoint", "sparkpoint"), ("sparkpoint:e2e", "sparkpoint"), ("ghcr.io/org/sparkpoint:1.2", "sparkpoint"),
    ("localhost:5000/team/runner@sha256:abc", "runner"), ("python:3.11-slim", "python"),
])
def test_image_name_rule(image, entrypoint):
    assert image_entrypoint(image) == entrypoint


def test_argv_prefers_the_virtualenv_then_path(tmp_path: Path):
    (tmp_path / "sparkpoint").touch()
    which = {"sh": "/bin/sh"}.get
    assert resolve_argv({"image": "x/sparkpoint:1", "args": ["run", "$(JOB)"]}, {"JOB": "j"}, tmp_path, which) == [
        str(tmp_path / "sparkpoint"), "run", "j"]
    assert resolve_argv({"image": "i", "command": ["sh", "-c", "true"]}, {}, tmp_path, which)[0] == "/bin/sh"
    assert resolve_argv({"image": "i", "command": ["/abs/prog"]}, {}, tmp_path, which) == ["/abs/prog"]


def test_env_order_and_sources():
    objects = {("ConfigMap", "cm"): {"data": {"a": "1", "b": "2"}},
               ("Secret", "s"): {"data": {"pw": base64.b64encode(b"hunter2").decode()}}}
    container = {
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}, {"secretRef": {"name": "missing", "optional": True}}],
        "env": [{"name": "CM_a", "value": "override"}, {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "BOTH", "value": "$(CM_b)-$(PW)"}],
    }
    env = build_env(POD, container, lambda kind, name: objects.get((kind, name)), {"PATH": "/bin"}, "127.1.0.2", "127.0.0.1")
    assert env == {"PATH": "/bin", "CM_a": "override", "CM_b": "2", "PW": "hunter2", "IP": "127.1.0.2",
                   "APP": "x", "BOTH": "2-hunter2"}


def test_missing_required_reference_is_a_config_error():
    container = {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "nope"}}}]}
    with pytest.raises(ConfigError, match="couldn't find key nope"):
        build_env(POD, container, lambda kind, name: {"data": {}}, {}, "", "")


def test_mounts_are_ordered_parents_first_and_reject_escaping_subpaths(tmp_path: Path):
    container = {"volumeMounts": [{"name": "a", "mountPath": "/x/y/z"}, {"name": "b", "mountPath": "/x", "readOnly": True}]}
    mounts = mounts_for(container, {"a": tmp_path / "a", "b": tmp_path / "b"})
    assert [m.target for m in mounts] == ["/x", "/x/y/z"] and mounts[0].read_only
    with pytest.raises(ConfigError):
        mounts_for({"volumeMounts": [{"name": "a", "mountPath": "/m", "subPath": "../etc"}]}, {"a": tmp_path})
    # a missing subPath directory is made, with the volume root's mode (the kubelet does the same)
    (tmp_path / "hot").mkdir()
    (tmp_path / "hot").chmod(0o777)
    (mount,) = mounts_for({"volumeMounts": [{"name": "h", "mountPath": "/v/ns/job/uid", "subPath": "ns/job/uid"}]},
                          {"h": tmp_path / "hot"})
    assert mount.source == tmp_path / "hot/ns/job/uid" and mount.source.is_dir()
    assert all((tmp_path / "hot" / d).stat().st_mode & 0o777 == 0o777 for d in ("ns", "ns/job", "ns/job/uid"))


@given(st.lists(st.sampled_from([f"uid-{i}" for i in range(20)]), max_size=60))
def test_address_pool_never_gives_one_address_to_two_live_pods(operations):
    pool, live = AddressPool(), {}
    for uid in operations:
        if uid in live and len(live) % 3 == 0:
            pool.release(uid)
            del live[uid]
        else:
            live[uid] = pool.claim(uid)
            assert pool.claim(uid) == live[uid], "a pod's address must be stable"
    assert len(set(live.values())) == len(live)


def test_log_files_pick_the_pod_uid_and_order_runs_numerically(tmp_path: Path):
    from logs_server import log_files, tail
    for uid, runs in (("old", [0]), ("new", [0, 1, 2, 10])):
        for run in runs:
            path = tmp_path / f"ns_p_{uid}" / "main" / f"{run}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{uid}-{run}\n")
    assert [f.stem for f in log_files(tmp_path, "ns", "p", "main", "new")] == ["0", "1", "2", "10"]
    assert [f.stem for f in log_files(tmp_path, "ns", "p", "main", "old")] == ["0"]
    assert log_files(tmp_path, "ns", "other", "main", None) == []
    assert tail(b"a\nb\nc\n", 2) == b"b\nc\n" and tail(b"a\n", None) == b"a\n" and tail(b"a\n", 0) == b""


def test_the_termination_message_file_is_bound_at_the_containers_path_and_read_back(tmp_path):
    """As the kubelet: terminationMessagePath (default /dev/termination-log) is a file of the pod's
    own inside the container; what the process wrote there becomes state.terminated.message, cut at
    4096 bytes; a container that wrote nothing has no message."""
    from podspec import MESSAGE_LIMIT, termination_message, termination_mount

    source = tmp_path / "termination" / "runtime"
    source.parent.mkdir()
    assert termination_mount({"name": "runtime"}, source).target == "/dev/termination-log"
    assert termination_mount({"terminationMessagePath": "/tmp/why"}, source).target == "/tmp/why"
    assert termination_message(source) == ""  # not even created
    source.write_text('{"rescaleFailed": {"from": 2, "to": 4}}')
    message = termination_message(source)
    assert message == '{"rescaleFailed": {"from": 2, "to": 4}}'
    assert Terminated(4, "Error", T0, T1, message).to_api()["terminated"]["message"] == message
    source.write_bytes(b"x" * (MESSAGE_LIMIT + 100))
    assert len(termination_message(source)) == MESSAGE_LIMIT
    assert "message" not in Terminated(0, "Completed", T0, T1, "").to_api()["terminated"]
