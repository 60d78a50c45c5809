"""Pure parts of the operator load benchmark (bench/operator_load): address allocation, trigger lag,
percentiles, /proc parsing, and that a stand-in runtime answers as the operator expects."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from operator_load import jobs, procstat, report_md  # noqa: E402
from operator_load.fake_kubelet import AddressPool, pod_key, running_status  # noqa: E402
from operator_load.fake_runtime import PodRuntime, TriggerLog  # noqa: E402

from sparkpoint.operator.decisions import checkpoints as cp  # noqa: E402
from sparkpoint.operator.decisions.observe import pod_observation  # noqa: E402
from sparkpoint.operator.decisions.status_model import PendingTrigger  # noqa: E402


def test_address_pool_gives_each_pod_its_own_loopback_address_and_reuses_released_ones():
    pool = AddressPool("127.3.0.0/30")  # two host addresses
    a, b = pool.claim("uid-a"), pool.claim("uid-b")
    assert {a, b} == {"127.3.0.1", "127.3.0.2"}
    assert pool.claim("uid-a") == a  # the same pod keeps its address
    with pytest.raises(RuntimeError, match="no free pod address"):
        pool.claim("uid-c")
    assert pool.release("uid-a") == a
    assert pool.claim("uid-c") == a


def test_address_pool_refuses_a_network_that_is_not_loopback():
    with pytest.raises(ValueError, match="loopback"):
        AddressPool("10.0.0.0/24")


@given(st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=50))
def test_address_pool_never_hands_one_address_to_two_live_pods(uids):
    pool = AddressPool("127.3.0.0/16")
    live = {}
    for i, uid in enumerate(uids):
        if i % 3 == 2 and live:
            pool.release(next(iter(live)))
            live.pop(next(iter(live)))
        live[uid] = pool.claim(uid)
    assert len(set(live.values())) == len(live)
    assert all(ipaddress.ip_address(ip).is_loopback for ip in live.values())


def test_trigger_lag_is_arrival_minus_one_interval_after_the_previous_trigger_of_the_same_pod():
    log = TriggerLog()
    for at in (100.0, 110.5, 121.0, 130.9):
        log.record("ns/a-1", at)
    for at in (105.0, 115.0):
        log.record("ns/b-1", at)
    lags = log.lags(interval=10.0, since=0.0, until=1e9)
    assert sorted(round(x, 3) for x in lags) == [-0.1, 0.0, 0.5, 0.5]
    # only triggers that arrived inside the window count; a pod's first trigger has no lag
    assert [round(x, 3) for x in log.lags(interval=10.0, since=120.0, until=125.0)] == [0.5]


def test_the_load_report_uses_the_benchmarks_one_percentile():
    from peers import stats

    assert report_md.percentile is stats.percentile
    values = [float(v) for v in range(1, 101)]
    assert report_md.percentile(values, 50) == 50.5 and report_md.percentile([3.0], 99) == 3.0
    with pytest.raises(ValueError):
        report_md.percentile([], 50)


def test_proc_stat_cpu_parses_a_command_with_spaces_and_parentheses():
    stat = "1234 (python (x) y) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 150 0 0 20 0 5 0 1 2 3"
    assert procstat.parse_stat_cpu(stat) == pytest.approx(400 / procstat.TICKS)
    assert procstat.parse_status_kib("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS") == 2048


def test_the_own_process_can_be_sampled():
    import os

    sample = procstat.sample(os.getpid())
    assert sample.rss_bytes > 0 and sample.peak_rss_bytes >= sample.rss_bytes and sample.cpu_seconds > 0


def test_stand_in_runtime_answers_a_trigger_as_the_operator_follows_it():
    runtime = PodRuntime("ns/job-1", attempt=1)
    doc = runtime.trigger(now=1000.0)
    status = runtime.status()
    pending = PendingTrigger(at=999.0, id=doc["id"])
    latest = cp.fact_from_runtime(status["latestCheckpoint"])
    assert latest is not None and latest.id == doc["id"]
    assert cp.follow_trigger(pending, status, cp.parse_time(latest.completed_at), timeout=60, now=1001.0) == "completed"


def test_fake_kubelet_status_reads_as_a_ready_running_pod_to_the_operator():
    pod = {"metadata": {"name": "job-2", "namespace": "ns", "annotations": {"sparkpoint.dev/attempt": "2"}},
           "status": running_status("127.3.0.9", "127.3.0.1", ["runtime"], started=1000.0)}
    obs = pod_observation(pod)
    assert (obs.phase, obs.ready, obs.ip, obs.attempt, obs.exit_code) == ("Running", True, "127.3.0.9", 2, None)
    assert pod_key(pod) == "ns/job-2"


def test_job_spec_is_valid_and_names_its_store_secret():
    spec = jobs.job_spec("10s", "1s")
    assert spec["checkpoint"]["storage"]["secretRef"]["name"] == jobs.SECRET
    assert spec["gc"]["enabled"] is False
    assert jobs.streaming_job("ns", 7, spec)["metadata"]["name"] == "load-0007"


def test_operator_histogram_percentile_names_the_bucket_bound():
    buckets = {'x_bucket{le="0.5"}': 90.0, 'x_bucket{le="1.0"}': 99.0, 'x_bucket{le="2.0"}': 100.0,
               'x_bucket{le="+Inf"}': 100.0}
    assert report_md.bucket_percentile(buckets, 50) == "<= 0.5 s"
    assert report_md.bucket_percentile(buckets, 99.5) == "<= 2 s"
    assert report_md.bucket_percentile({}, 99) == "n/a"
