"""An in-place restart of a spark.master k8s driver (issue 42, finding 4): its executors get names
of their own start, and the crashed start's executors are waited out before the hot dir is resumed.
All pure (the API calls are stand-ins)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkpoint.runtime.spark import earlier_executors, executors
from sparkpoint.runtime.spec import job as config

ENV = {"SPARKPOINT_POD_NAME": "clicks-3", "POD_IP": "10.1.2.3", "SPARKPOINT_ATTEMPT": "3",
       "SPARKPOINT_HOT_VOLUME_PATH": "/var/lib/sparkpoint", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
       "KUBERNETES_SERVICE_PORT": "443"}
# Spark's own check of spark.kubernetes.executor.podNamePrefix (4.3.0's Config.isValidExecutorPodNamePrefix)
# is a DNS-1123 subdomain with room for "-exec-<Int.MaxValue>" in 253; ours: every name a DNS label (63).
SPARK_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def spec(hot: dict) -> config.JobSpec:
    return config.parse_spec({"job": {"entrypoint": "a:b"}, "image": "sparkpoint/runtime:dev",
                              "spark": {"master": "k8s", "executors": {"instances": 2}},
                              "checkpoint": {"hotVolume": hot}})


def test_each_start_of_the_runtime_names_its_executors_apart(tmp_path) -> None:
    """A restarted runtime used the driver pod's name as the prefix again: its executors took the
    names of the crashed start's executors, which may still run."""
    pvc = spec({"persistentVolumeClaim": {"claimName": "hot"}})
    first = executors.prepare_driver(pvc, "team", "clicks", tmp_path, ENV, 7)
    template = json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())
    again = executors.prepare_driver(pvc, "team", "clicks", tmp_path, ENV, 8)
    key = "spark.kubernetes.executor.podNamePrefix"
    assert first[key] == "clicks-3-s7" and again[key] == "clicks-3-s8"
    assert first[f"spark.kubernetes.executor.label.{executors.START_LABEL}"] == "7"
    assert template["metadata"]["labels"][executors.START_LABEL] == "7"


@given(job=st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,60}[a-z0-9])?", fullmatch=True),
       attempt=st.integers(1, 10**6), start=st.integers(1, 2**31 - 1))
def test_the_prefix_always_passes_sparks_check_and_keeps_the_start(job, attempt, start) -> None:
    pod = f"{job}-{attempt}"[:63]
    prefix = executors.executor_pod_prefix(pod, start)
    assert len(prefix) + len("-exec-") + len(str(2**31 - 1)) <= 63
    assert SPARK_PREFIX.fullmatch(prefix) and "." not in prefix  # a DNS label: also a valid hostname
    assert len(prefix) + len("-exec-") + 10 <= 253  # Spark's own bound, a fortiori
    assert prefix.endswith(f"-s{start}")
    assert executors.executor_pod_prefix(pod, start + 1) != prefix


def test_a_long_driver_name_keeps_its_head_and_is_told_apart_by_a_digest() -> None:
    a, b = "x" * 50 + "-alpha-12", "x" * 50 + "-bravo-12"
    pa, pb = executors.executor_pod_prefix(a, 3), executors.executor_pod_prefix(b, 3)
    assert pa != pb and pa.startswith("x" * 20) and len(pa) <= executors.PREFIX_MAX
    assert executors.executor_pod_prefix("clicks-3", None) == "clicks-3"  # no start known: as before


def test_on_a_host_path_executors_run_on_the_drivers_node_and_on_a_claim_anywhere(tmp_path) -> None:
    env = {**ENV, executors.NODE_NAME_ENV: "node-b"}
    executors.prepare_driver(spec({"hostPath": {"path": "/srv/hot"}}), "team", "clicks", tmp_path, env, 1)
    template = json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}
    executors.prepare_driver(spec({"persistentVolumeClaim": {"claimName": "hot"}}), "team", "clicks", tmp_path, env, 1)
    assert "affinity" not in json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())["spec"]


def pod(name: str, start: str | None, phase: str = "Running", deleting: bool = False) -> dict:
    labels = {executors.START_LABEL: start} if start is not None else {}
    meta = {"name": name, "labels": labels, **({"deletionTimestamp": "2026-11-28T04:00:00Z"} if deleting else {})}
    return {"metadata": meta, "status": {"phase": phase}}


@pytest.mark.parametrize("listed, expected", [
    ([pod("a", "7"), pod("b", "8")], ["a"]),  # start 8's own executors are not waited for
    ([pod("a", "7", deleting=True)], ["a"]),  # being deleted: may still write until it stops
    ([pod("a", "7", "Succeeded"), pod("b", "7", "Failed")], []),  # ended
    ([pod("old", None)], ["old"]),  # an executor of a runtime before the start label
    ([pod("p", "7", "Pending")], ["p"]),
    ([], []),
])
def test_which_executors_an_earlier_start_left_running(listed, expected) -> None:
    assert earlier_executors.earlier_live(listed, 8) == expected


class FakeApi:
    """Executor pods that go a number of polls after their deletion (their grace period)."""

    def __init__(self, pods: list[dict], polls_to_go: int, fail: Exception | None = None):
        self.pods, self.polls_to_go, self.fail = pods, polls_to_go, fail
        self.deleted: list[str] = []
        self.countdown: dict[str, int] = {}
        self.now = 0.0

    def list(self) -> list[dict]:
        if self.fail:
            raise self.fail
        for name in list(self.countdown):
            self.countdown[name] -= 1
            if self.countdown[name] < 0:
                self.pods = [p for p in self.pods if p["metadata"]["name"] != name]
        return self.pods

    def delete(self, name: str) -> None:
        self.deleted.append(name)
        self.countdown.setdefault(name, self.polls_to_go)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_earlier_starts_executors_are_deleted_once_and_waited_out() -> None:
    api = FakeApi([pod("clicks-3-exec-1", None), pod("clicks-3-s8-exec-1", "8")], polls_to_go=3)
    outcome = earlier_executors.wait_out(api.list, api.delete, 8, clock=lambda: api.now, sleep=api.sleep)
    assert outcome.gone and outcome.error is None
    assert api.deleted == ["clicks-3-exec-1"]  # once, and never this start's own
    assert api.now == 4 * earlier_executors.POLL


def test_executors_that_outlive_the_wait_leave_it_undecided() -> None:
    api = FakeApi([pod("clicks-3-s7-exec-2", "7")], polls_to_go=10**6)
    outcome = earlier_executors.wait_out(api.list, api.delete, 8, clock=lambda: api.now, sleep=api.sleep,
                                         wait_for=10.0)
    assert not outcome.gone and outcome.left == ["clicks-3-s7-exec-2"] and api.now >= 10.0


def test_an_api_that_refuses_leaves_it_undecided_naming_why() -> None:
    api = FakeApi([], polls_to_go=0, fail=PermissionError("403 Forbidden"))
    outcome = earlier_executors.wait_out(api.list, api.delete, 8, clock=lambda: api.now, sleep=api.sleep)
    assert not outcome.gone and "403" in (outcome.error or "")


def test_the_selector_finds_every_start_of_this_attempt() -> None:
    driver = executors.driver_from_env(ENV, "team", "clicks", 8)
    selector = earlier_executors.attempt_selector(driver)
    labels = executors.executor_labels(driver)
    for term in selector.split(","):
        key, value = term.split("=")
        assert key == "spark-role" or labels[key] == value  # Spark adds spark-role itself
    assert executors.START_LABEL not in selector


@pytest.mark.parametrize("master, restart, gone, waited, resume", [
    ("k8s", 1, True, True, True),  # a restarted driver: waits, then may resume the hot dir
    ("k8s", 1, False, True, False),  # earlier executors may still run: no local recovery
    ("k8s", 0, False, False, True),  # the pod's first start: nothing earlier of this attempt
    ("local[2]", 3, False, False, True),  # no executor pods at all
])
def test_a_restarted_driver_resumes_the_hot_dir_only_once_earlier_executors_are_gone(
        monkeypatch, master, restart, gone, waited, resume) -> None:
    from sparkpoint.runtime.service.runner import JobRuntime
    from sparkpoint.runtime.store import JobRef

    calls = []

    def fake(driver, start):
        calls.append((driver.attempt, start))
        return earlier_executors.WaitOutcome(gone, left=[] if gone else ["clicks-3-s7-exec-1"])

    monkeypatch.setattr(earlier_executors, "earlier_executors_gone", fake)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    runtime = object.__new__(JobRuntime)
    runtime.spec = config.parse_spec({"job": {"entrypoint": "a:b"}, "spark": {"master": master}}
                                     if master != "k8s" else {"job": {"entrypoint": "a:b"}, "image": "i",
                                                              "spark": {"master": "k8s", "executors": {}},
                                                              "checkpoint": {"hotVolume": {"hostPath": {"path": "/h"}}}})
    runtime.job, runtime.attempt, runtime.restart = JobRef("team", "clicks"), 8, restart
    assert runtime._earlier_executors_gone() is resume
    assert calls == ([("3", 8)] if waited else [])


def test_the_api_calls_list_by_the_attempts_labels_and_delete_by_name_with_the_token() -> None:
    """ExecutorPods against a stand-in API server (plain HTTP here; in a pod, HTTPS with the CA)."""
    import http.server
    import threading
    import urllib.parse

    seen = []

    class Api(http.server.BaseHTTPRequestHandler):
        def _answer(self, code: int, doc: dict) -> None:
            seen.append((self.command, self.path, self.headers["Authorization"]))
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            self._answer(200, {"items": [pod("clicks-3-s7-exec-1", "7")]})

        def do_DELETE(self):  # noqa: N802
            self._answer(404, {"reason": "NotFound"})  # already gone: not an error

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        driver = executors.DriverPod("team", "clicks", "3", "clicks-3", "10.0.0.1",
                                     f"http://127.0.0.1:{server.server_port}", "/v", start=8)
        api = earlier_executors.ExecutorPods(driver, "tok", None)
        assert [p["metadata"]["name"] for p in api.list()] == ["clicks-3-s7-exec-1"]
        api.delete("clicks-3-s7-exec-1")
    finally:
        server.shutdown()
    (get, get_path, auth), (delete, delete_path, _) = seen
    assert (get, delete, auth) == ("GET", "DELETE", "Bearer tok")
    path, query = get_path.split("?")
    assert path == "/api/v1/namespaces/team/pods" == delete_path.rsplit("/", 1)[0]
    assert urllib.parse.parse_qs(query)["labelSelector"] == [earlier_executors.attempt_selector(driver)]
    assert delete_path.endswith("/clicks-3-s7-exec-1")
