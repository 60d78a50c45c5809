"""The plugin's view of a job's executor pods (plugin/executors.py): selector, table, status lines."""

from __future__ import annotations

from datetime import UTC, datetime

from sparkpoint.plugin import cli
from sparkpoint.plugin import executors as ex
from sparkpoint.plugin import format as fmt

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def executor(name: str, attempt: int | str | None, phase: str = "Running", node: str | None = "node-a",
             ready: bool = True, restarts: int = 0, deleting: bool = False) -> dict:
    labels = {"sparkpoint.dev/job": "clicks", "spark-role": "executor"}
    if attempt is not None:
        labels["sparkpoint.dev/attempt"] = str(attempt)
    meta = {"name": name, "labels": labels, "creationTimestamp": "2026-11-22T11:55:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T11:59:00Z"
    spec = {"containers": [{"name": "executor"}]} | ({"nodeName": node} if node else {})
    status = {"phase": phase, "containerStatuses": [{"name": "executor", "ready": ready, "restartCount": restarts}]}
    return {"metadata": meta, "spec": spec, "status": status}


def test_selector_names_the_job_the_role_and_optionally_the_attempt():
    assert ex.selector("clicks") == "sparkpoint.dev/job=clicks,spark-role=executor"
    assert ex.selector("clicks", 3) == "sparkpoint.dev/job=clicks,spark-role=executor,sparkpoint.dev/attempt=3"


def test_table_lists_name_attempt_phase_node_restarts_oldest_attempt_first():
    pods = [executor("clicks-3-exec-10", 3, restarts=2), executor("clicks-3-exec-2", 3),
            executor("clicks-2-exec-1", 2, phase="Running", deleting=True, ready=False),
            executor("clicks-3-exec-11", 3, phase="Pending", node=None, ready=False)]
    lines = fmt.table(*ex.executor_rows(pods, NOW)).splitlines()
    assert lines[0].split() == ["NAME", "ATTEMPT", "PHASE", "READY", "NODE", "RESTARTS", "AGE"]
    assert [line.split() for line in lines[1:]] == [
        ["clicks-2-exec-1", "2", "Terminating", "0/1", "node-a", "0", "5m"],
        ["clicks-3-exec-2", "3", "Running", "1/1", "node-a", "0", "5m"],
        ["clicks-3-exec-10", "3", "Running", "1/1", "node-a", "2", "5m"],  # 10 after 2: numbers as numbers
        ["clicks-3-exec-11", "3", "Pending", "0/1", "<none>", "0", "5m"]]
    assert lines[0].index("PHASE") == lines[1].index("Terminating")


def test_a_pod_without_statuses_yet_counts_its_spec_containers():
    pod = {"metadata": {"name": "clicks-1-exec-1", "labels": {"sparkpoint.dev/attempt": "x"}},
           "spec": {"containers": [{"name": "executor"}]}, "status": {}}
    assert ex.executor_row(pod, NOW) == ["clicks-1-exec-1", None, "Pending", "0/1", None, 0, "<none>"]


def test_status_lists_the_current_attempts_executors_and_counts_older_ones():
    pods = [executor("clicks-3-exec-1", 3), executor("clicks-3-exec-2", 3, restarts=1),
            executor("clicks-2-exec-1", 2, deleting=True), executor("clicks-1-exec-4", 1)]
    lines = ex.status_section(pods, 3, NOW)
    assert lines[0] == "Executors:"
    assert lines[1].split()[:2] == ["NAME", "ATTEMPT"] and lines[1].startswith("  ")
    assert [line.split()[0] for line in lines[2:4]] == ["clicks-3-exec-1", "clicks-3-exec-2"]
    assert lines[4] == ("  2 executor pod(s) of other attempts still present (attempt 1, 2): "
                        "kubectl sparkpoint executors JOB")
    assert ex.status_section([], 3, NOW) == ["Executors:        none of attempt 3"]
    assert ex.status_section([executor("clicks-1-exec-1", 1)], None, NOW)[0] == "Executors:        none of attempt <none>"


def test_executors_is_a_command_with_kubectls_flags():
    args = cli.parser().parse_args(["executors", "clicks", "-n", "team", "-o", "json"])
    assert (args.command, args.job, args.namespace, args.output) == ("executors", "clicks", "team", "json")


def test_rescale_says_what_the_executors_section_asks_for():
    assert fmt.executor_count({"instances": 3, "cores": 1}) == "executors.instances = 3"
    assert fmt.executor_count(None) == "executors.instances = <none>"
    assert fmt.executor_count({"dynamic": {"min": 1, "max": 4, "idleTimeout": "30s"}}) == \
        "executors.dynamic = 1..4 (idle 30s)"
