"""Issue 28: the driver's JVM heap is sized from the runtime container's memory limit, so a job never
asks its JVM for more than its pod may hold (a 1g heap in a 512Mi container was OOM-killed)."""

from __future__ import annotations

import pytest

from sparkpoint.operator.kube import builders
from sparkpoint.runtime.spark.session import session_conf
from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec import rules as spec_rules

GI = 1 << 30


@pytest.mark.parametrize(("limit", "heap"), [
    ("1Gi", "512m"),  # the spec's minimum: the smallest heap Spark accepts
    ("1536Mi", "1024m"),
    ("2Gi", "1536m"),  # the default resources
    ("4Gi", "3072m"),  # from here on, a quarter of the limit stays outside the heap
    ("8Gi", "6144m"),
    ("1.5G", "918m"),  # decimal units: 1,500,000,000 bytes (1430.5Mi)
])
def test_the_heap_leaves_the_reserve_and_a_quarter_of_the_limit(limit: str, heap: str) -> None:
    assert spec_rules.driver_memory(limit) == heap


@pytest.mark.parametrize("limit_bytes", [GI, GI + 1, 3 * GI // 2, 2 * GI, 3 * GI, 5 * GI, 64 * GI])
def test_the_heap_never_comes_closer_to_the_limit_than_the_reserve(limit_bytes: int) -> None:
    heap = spec_rules.driver_heap_mib(limit_bytes) * spec_rules.MIB
    assert spec_rules.MIN_HEAP_MIB * spec_rules.MIB <= heap <= limit_bytes - spec_rules.NON_HEAP_RESERVE_MIB * spec_rules.MIB
    assert heap <= limit_bytes * 3 // 4


def test_a_limit_below_the_minimum_is_refused_naming_what_spark_needs() -> None:
    with pytest.raises(ValueError, match="leaves a 256Mi driver heap; Spark needs 512Mi, so the limit must be at least 1024Mi"):
        spec_rules.driver_heap_mib(768 << 20)


def test_the_spec_minimum_is_the_smallest_limit_the_sizing_accepts() -> None:
    """MIN_MEMORY (the CRD's and the model's bound) and MIN_CONTAINER_MIB (the sizing's) agree."""
    minimum = spec_rules.parse_quantity(spec_rules.MIN_MEMORY)
    assert minimum == spec_rules.MIN_CONTAINER_MIB * spec_rules.MIB
    assert spec_rules.driver_heap_mib(minimum) == spec_rules.MIN_HEAP_MIB


def _spec(**spark) -> dict:
    return {"job": {"entrypoint": "a:b"}, "spark": spark}


def test_a_spec_too_small_for_spark_is_refused_naming_the_field() -> None:
    with pytest.raises(config.SpecError, match=r"spec\.spark\.resources\.memory: must be at least 1Gi \(got 512Mi\)"):
        config.parse_spec(_spec(resources={"memory": "512Mi"}))


def test_the_heap_is_not_a_conf_entry() -> None:
    """A spark.driver.memory the limit cannot hold is what got pods OOM-killed: the spec's memory sets it."""
    with pytest.raises(config.SpecError, match=r"spec\.spark\.conf: .*spark\.driver\.memory is set by Sparkpoint: "
                                               r"set spec\.spark\.resources\.memory instead"):
        config.parse_spec(_spec(conf={"spark.driver.memory": "4g"}))


@pytest.mark.parametrize(("memory_limit", "heap"), [(None, "1536m"), ("1Gi", "512m"), ("3Gi", "2304m")])
def test_the_runtime_container_gets_the_heap_of_its_limit(memory_limit: str | None, heap: str) -> None:
    resources = {"memory": memory_limit} if memory_limit else {}
    spec = config.parse_spec(_spec(resources=resources))
    container = builders.runtime_container(builders.JobRef("ns", "job", "uid"), spec)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[spec_rules.DRIVER_MEMORY_ENV] == heap
    assert container["resources"]["limits"]["memory"] == spec.spark.resources.memory


def test_the_session_takes_the_heap_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    spark = config.parse_spec(_spec()).spark
    monkeypatch.delenv(spec_rules.DRIVER_MEMORY_ENV, raising=False)
    assert session_conf(spark)["spark.driver.memory"] == "1g"  # a local run: no container limit
    monkeypatch.setenv(spec_rules.DRIVER_MEMORY_ENV, "512m")
    assert session_conf(spark)["spark.driver.memory"] == "512m"
