"""What the operator relies on from the node: pods run with their IP, env, ConfigMaps and
Secrets; restartPolicy and restart counts; emptyDir across restarts; deletion with SIGTERM."""

from __future__ import annotations

import ipaddress
import textwrap
import time

import pytest
from kube_helpers import container_status, pod_logs, python_container, wait_for
from kubernetes import client, watch

SERVE_WHEN_CONFIG_MATCHES = textwrap.dedent("""
    import os, pathlib, sys, http.server
    expected = {
        "GREETING": "hello", "PASSWORD": "s3cr3t-test-value", "CM_greeting": "hello",
        "CM_mode": "fast", "MY_NAMESPACE": os.environ["EXPECTED_NAMESPACE"],
    }
    problems = [f"{k}={os.environ.get(k)!r}, expected {v!r}" for k, v in expected.items()
                if os.environ.get(k) != v]
    files = {"/etc/e2e-config/mode": "fast", "/etc/e2e-secret/password": "s3cr3t-test-value"}
    for path, want in files.items():
        got = pathlib.Path(path).read_text() if pathlib.Path(path).exists() else None
        if got != want:
            problems.append(f"{path}: {got!r}, expected {want!r}")
    if problems:
        print("config mismatch:", *problems, sep="\\n  ", flush=True)
        sys.exit(1)
    # Serving on the pod IP proves the address is usable; the readiness probe reaches it there.
    print("config ok, serving on", os.environ["MY_POD_IP"], flush=True)
    http.server.HTTPServer((os.environ["MY_POD_IP"], 8080), http.server.SimpleHTTPRequestHandler).serve_forever()
""")


def field_env(name: str, path: str) -> client.V1EnvVar:
    return client.V1EnvVar(name=name, value_from=client.V1EnvVarSource(
        field_ref=client.V1ObjectFieldSelector(field_path=path)))


def test_pod_runs_with_ip_env_configmap_and_secret(core, namespace, pods):
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings"), data={"greeting": "hello", "mode": "fast"}))
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="creds"), string_data={"password": "s3cr3t-test-value"}))
    env = [
        client.V1EnvVar(name="GREETING", value_from=client.V1EnvVarSource(
            config_map_key_ref=client.V1ConfigMapKeySelector(name="settings", key="greeting"))),
        client.V1EnvVar(name="PASSWORD", value_from=client.V1EnvVarSource(
            secret_key_ref=client.V1SecretKeySelector(name="creds", key="password"))),
        client.V1EnvVar(name="EXPECTED_NAMESPACE", value=namespace),
        field_env("MY_NAMESPACE", "metadata.namespace"), field_env("MY_POD_IP", "status.podIP"),
    ]
    container = python_container(
        SERVE_WHEN_CONFIG_MATCHES, env=env,
        env_from=[client.V1EnvFromSource(prefix="CM_", config_map_ref=client.V1ConfigMapEnvSource(name="settings"))],
        volume_mounts=[client.V1VolumeMount(name="config", mount_path="/etc/e2e-config"),
                       client.V1VolumeMount(name="secret", mount_path="/etc/e2e-secret", read_only=True)],
        readiness_probe=client.V1Probe(http_get=client.V1HTTPGetAction(path="/", port=8080),
                                       period_seconds=1, failure_threshold=1))
    volumes = [client.V1Volume(name="config", config_map=client.V1ConfigMapVolumeSource(name="settings")),
               client.V1Volume(name="secret", secret=client.V1SecretVolumeSource(secret_name="creds"))]
    for name in ("app-a", "app-b"):
        pods.create(name, [container], volumes=volumes, restart_policy="Never")

    ready = [pods.wait(name, "Ready", lambda p: any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])) for name in ("app-a", "app-b")]
    for pod in ready:
        assert pod.status.phase == "Running"
        assert container_status(pod).state.running is not None
        assert container_status(pod).restart_count == 0
        ipaddress.ip_address(pod.status.pod_ip)  # a real address, not empty
    assert ready[0].status.pod_ip != ready[1].status.pod_ip, "two pods share one pod IP"


@pytest.mark.parametrize(("policy", "exit_code", "phase"), [
    ("Always", 3, "Running"), ("OnFailure", 3, "Running"), ("Never", 3, "Failed"),
    ("OnFailure", 0, "Succeeded"), ("Always", 0, "Running"),
])
def test_restart_policy_is_applied(pods, policy, exit_code, phase):
    pods.create("exits", [python_container(f"import sys; print('bye'); sys.exit({exit_code})")],
                restart_policy=policy)
    restarts = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
    if restarts:
        pod = pods.wait("exits", "two restarts", lambda p: (container_status(p) or 0)
                        and container_status(p).restart_count >= 2, timeout=120)
        last = container_status(pod).last_state.terminated
        assert last is not None and last.exit_code == exit_code
        assert pod.status.phase == phase
    else:
        pod = pods.wait_phase("exits", phase)
        status = container_status(pod)
        assert status.restart_count == 0
        assert status.state.terminated.exit_code == exit_code
        # Deliberate quiet window, once the pod is terminal: no late restart follows (longer than
        # the local node agent's first restart backoff, 1 s, so a wrongly applied policy shows).
        time.sleep(3)
        assert container_status(pods.read("exits")).restart_count == 0


def test_empty_dir_survives_container_restart(pods):
    script = textwrap.dedent("""
        import pathlib, sys
        marker = pathlib.Path("/scratch/first-run-was-here")
        if marker.exists():
            print("marker found after restart"); sys.exit(0)
        marker.write_text("x"); print("first run, exiting to be restarted"); sys.exit(1)
    """)
    container = python_container(script, volume_mounts=[client.V1VolumeMount(name="scratch", mount_path="/scratch")])
    pods.create("restarts", [container], restart_policy="OnFailure",
                volumes=[client.V1Volume(name="scratch", empty_dir=client.V1EmptyDirVolumeSource())])
    pod = pods.wait_phase("restarts", "Succeeded")
    status = container_status(pod)
    assert status.restart_count == 1, "the second run did not find the first run's file"
    assert status.state.terminated.exit_code == 0


SIGTERM_EXITS_42 = textwrap.dedent("""
    import signal, sys, time
    def on_term(*_):
        print("SIGTERM received", flush=True); time.sleep(0.5); sys.exit(42)
    signal.signal(signal.SIGTERM, on_term)
    print("waiting", flush=True)
    while True: time.sleep(0.1)
""")
IGNORES_SIGTERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.1)"


def delete_and_watch(core, namespace: str, name: str, timeout: float = 120) -> tuple[float, client.V1Pod]:
    """Deletes the pod; returns seconds until it is gone and its last state before that."""
    pod = core.read_namespaced_pod(name, namespace)
    started = time.monotonic()
    core.delete_namespaced_pod(name, namespace)
    last = pod
    for event in watch.Watch().stream(core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
                                      resource_version=pod.metadata.resource_version, timeout_seconds=int(timeout)):
        last = event["object"]
        if event["type"] == "DELETED":
            return time.monotonic() - started, last
    raise AssertionError(f"pod {name} still exists {timeout}s after deletion; last status {last.status}")


def running(pod: client.V1Pod) -> bool:
    status = container_status(pod)
    return bool(status and status.state.running)


def test_delete_sends_sigterm_within_grace_period(core, namespace, pods):
    pods.create("graceful", [python_container(SIGTERM_EXITS_42)], termination_grace_period_seconds=30)
    pods.wait("graceful", "container running", running)
    # The script prints "waiting" once its SIGTERM handler is installed.
    wait_for("the SIGTERM handler installed", lambda: "waiting" in pod_logs(core, namespace, "graceful"), timeout=60)
    seconds, last = delete_and_watch(core, namespace, "graceful")
    assert seconds < 20, f"deletion took {seconds:.1f}s for a process that exits on SIGTERM"
    terminated = container_status(last).state.terminated
    assert terminated is not None and terminated.exit_code == 42, "the process did not run its SIGTERM handler"


def test_delete_kills_after_grace_period(core, namespace, pods):
    pods.create("stubborn", [python_container(IGNORES_SIGTERM)], termination_grace_period_seconds=3)
    pods.wait("stubborn", "container running", running)
    seconds, last = delete_and_watch(core, namespace, "stubborn")
    assert 3 <= seconds < 30, f"deletion took {seconds:.1f}s with a 3s grace period"
    terminated = container_status(last).state.terminated
    assert terminated is not None and terminated.exit_code == 137, "expected SIGKILL after the grace period"


def test_failing_liveness_probe_restarts_the_container(pods):
    # The exec probes run with the container's mounts: they see /state, the pod's emptyDir. Each
    # readiness probe that passes leaves a line in /state/ready-probes; the container stops
    # answering once two have passed (it has been Ready for a probe period), not after a fixed time.
    script = textwrap.dedent("""
        import pathlib, time
        alive, answered = pathlib.Path("/state/alive"), pathlib.Path("/state/ready-probes")
        alive.write_text("yes"); print("alive", flush=True)
        while not answered.exists() or len(answered.read_text().splitlines()) < 2:
            time.sleep(0.1)
        alive.unlink(); print("stopped answering the probe", flush=True)
        while True: time.sleep(0.1)
    """)
    liveness = client.V1Probe(_exec=client.V1ExecAction(command=["cat", "/state/alive"]),
                              period_seconds=1, failure_threshold=2)
    readiness = client.V1Probe(_exec=client.V1ExecAction(
        command=["sh", "-c", "cat /state/alive && echo passed >> /state/ready-probes"]),
        period_seconds=1, failure_threshold=2)
    container = python_container(script, liveness_probe=liveness, readiness_probe=readiness,
                                 volume_mounts=[client.V1VolumeMount(name="state", mount_path="/state")])
    pods.create("probed", [container], volumes=[client.V1Volume(name="state", empty_dir=client.V1EmptyDirVolumeSource())])
    pods.wait("probed", "Ready", lambda p: bool(container_status(p) and container_status(p).ready))
    pod = pods.wait("probed", "a restart after the liveness probe failed",
                    lambda p: container_status(p).restart_count >= 1, timeout=120)
    assert container_status(pod).last_state.terminated.exit_code in (137, 143)
