"""spec.spark.executors.dynamic (issue 26): Spark's dynamic allocation instead of a fixed executor
count. The spec rules (field-named errors, instances and dynamic mutually exclusive), the driver's
Spark settings, and a serialization that leaves fixed-count jobs' spec keys as they were. Pure."""

from __future__ import annotations

import pytest

from sparkpoint.operator.decisions.step import spec_key
from sparkpoint.runtime.spark import executors
from sparkpoint.runtime.spec import job as config

HOT = {"hostPath": {"path": "/var/lib/hot"}}
ENV = {"SPARKPOINT_POD_NAME": "clicks-3", "POD_IP": "10.1.2.3", "SPARKPOINT_ATTEMPT": "3",
       "SPARKPOINT_HOT_VOLUME_PATH": "/var/lib/sparkpoint", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
       "KUBERNETES_SERVICE_PORT": "443"}


def _spec(executors_section: dict, conf: dict | None = None) -> dict:
    return {"job": {"entrypoint": "a:b"}, "image": "sparkpoint/runtime:dev",
            "spark": {"master": "k8s", "executors": executors_section, "conf": conf or {}},
            "checkpoint": {"hotVolume": HOT}}


@pytest.mark.parametrize(("section", "conf", "expected"), [
    ({"instances": 2, "dynamic": {"max": 4}}, None,
     "spec.spark.executors: instances and dynamic are mutually exclusive: a fixed executor count, or dynamic "
     "allocation between dynamic.min and dynamic.max"),
    ({"dynamic": {"min": 5, "max": 4}}, None, "spec.spark.executors.dynamic: min must not be greater than max"),
    ({"dynamic": {"min": 1}}, None, "spec.spark.executors.dynamic.max: Field required"),
    ({"dynamic": {"max": 0}}, None, "spec.spark.executors.dynamic.max: Input should be greater than or equal to 1"),
    ({"dynamic": {"min": -1, "max": 2}}, None, "spec.spark.executors.dynamic.min"),
    ({"dynamic": {"max": 2, "idleTimeout": "500ms"}}, None,
     "spec.spark.executors.dynamic.idleTimeout: must be at least 1s"),
    ({"dynamic": {"max": 2, "idleTimeout": "1 min"}}, None, "spec.spark.executors.dynamic.idleTimeout"),
    ({"dynamic": {"max": 2, "idle": "60s"}}, None, "spec.spark.executors.dynamic.idle: Extra inputs"),
    ({"dynamic": {"max": 2}}, {"spark.dynamicAllocation.enabled": "false"},
     "spec.spark.conf: spark.dynamicAllocation.enabled is set by Sparkpoint: set spec.spark.executors.dynamic"),
    ({"dynamic": {"max": 2}}, {"spark.dynamicAllocation.maxExecutors": "9"},
     "spec.spark.conf: spark.dynamicAllocation.maxExecutors is set by Sparkpoint: set "
     "spec.spark.executors.dynamic.max"),
    ({"instances": 2}, {"spark.dynamicAllocation.executorIdleTimeout": "5s"},
     "spec.spark.conf: spark.dynamicAllocation.executorIdleTimeout is set by Sparkpoint"),
])
def test_impossible_dynamic_specs_are_refused_naming_the_field(section, conf, expected) -> None:
    with pytest.raises(config.SpecError) as err:
        config.parse_spec(_spec(section, conf))
    assert str(err.value).startswith(expected), str(err.value)


def test_defaults_min_1_and_a_60s_idle_timeout_and_no_instances() -> None:
    ex = config.parse_spec(_spec({"dynamic": {"max": 4}})).spark.executors
    assert (ex.instances, ex.dynamic.min, ex.dynamic.max, ex.dynamic.idle_timeout) == (None, 1, 4, "60s")
    assert config.parse_spec(_spec({"dynamic": {"min": 0, "max": 1}})).spark.executors.dynamic.min == 0
    assert config.parse_spec(_spec({})).spark.executors.instances == 2  # neither given: a fixed count of 2


def test_dynamic_allocation_maps_to_sparks_settings_without_a_fixed_count() -> None:
    spec = config.parse_spec(_spec({"dynamic": {"min": 1, "max": 5, "idleTimeout": "2m"}, "cores": 2}))
    conf = executors.driver_conf(spec, executors.driver_from_env(ENV, "team", "clicks"), "/w/t.json")
    assert {k: v for k, v in conf.items() if k.startswith("spark.dynamicAllocation.")} == {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",  # no external shuffle service on k8s
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.maxExecutors": "5",
        "spark.dynamicAllocation.executorIdleTimeout": "120s",
        # old batches' shuffle files do not hold an idle executor past idleTimeout
        "spark.dynamicAllocation.shuffleTracking.timeout": "120s"}
    assert "spark.executor.instances" not in conf  # it would set the initial count above min
    assert conf["spark.executor.cores"] == "2" and conf["spark.executor.memory"] == "1024m"


def test_the_idle_timeout_is_whole_seconds_rounded_up_as_spark_reads_it() -> None:
    for given, expected in (("1500ms", "2s"), ("1s", "1s"), ("1000ms", "1s"), ("5m", "300s"), ("1h", "3600s")):
        ex = config.parse_spec(_spec({"dynamic": {"max": 2, "idleTimeout": given}})).spark.executors
        assert executors.allocation_conf(ex)["spark.dynamicAllocation.executorIdleTimeout"] == expected, given


def test_a_fixed_count_sets_instances_and_no_dynamic_allocation() -> None:
    conf = executors.allocation_conf(config.parse_spec(_spec({"instances": 3})).spark.executors)
    assert conf == {"spark.executor.instances": "3"}


def test_user_conf_cannot_override_the_mapping_but_may_set_the_shuffle_tracking_timeout() -> None:
    spec = config.parse_spec(_spec({"dynamic": {"max": 3}},
                                   {"spark.dynamicAllocation.shuffleTracking.timeout": "90s"}))
    assert spec.spark.conf == {"spark.dynamicAllocation.shuffleTracking.timeout": "90s"}


def test_a_fixed_count_dumps_as_before_so_spec_keys_do_not_change() -> None:
    """The operator hashes the spec's dump (step.spec_key); a new `dynamic: null` would make every
    running executors job upgrade to a new pod when the operator is upgraded."""
    fixed = config.parse_spec(_spec({"instances": 2}))
    assert fixed.model_dump(by_alias=True, mode="json")["spark"]["executors"] == {
        "instances": 2, "cores": 1, "memory": "1Gi"}
    dynamic = config.parse_spec(_spec({"dynamic": {"max": 4}}))
    doc = dynamic.model_dump(by_alias=True, mode="json")
    assert doc["spark"]["executors"] == {"dynamic": {"min": 1, "max": 4, "idleTimeout": "60s"}, "cores": 1,
                                         "memory": "1Gi"}
    assert config.JobSpec.model_validate(doc) == dynamic  # what status.tracking keeps parses back
    assert spec_key(dynamic) != spec_key(fixed)  # switching to dynamic allocation is an upgrade


def test_the_shuffle_tracking_timeout_is_the_idle_timeout_unless_the_spec_sets_it() -> None:
    driver = executors.driver_from_env(ENV, "team", "clicks")
    own = config.parse_spec(_spec({"dynamic": {"max": 3, "idleTimeout": "1500ms"}},
                                  {"spark.dynamicAllocation.shuffleTracking.timeout": "90s"}))
    assert executors.driver_conf(own, driver, "/t")["spark.dynamicAllocation.shuffleTracking.timeout"] == "90s"
    default = config.parse_spec(_spec({"dynamic": {"max": 3, "idleTimeout": "1500ms"}}))
    assert executors.driver_conf(default, driver, "/t")["spark.dynamicAllocation.shuffleTracking.timeout"] == "2s"
    fixed = config.parse_spec(_spec({"instances": 2}))
    assert "spark.dynamicAllocation.shuffleTracking.timeout" not in executors.driver_conf(fixed, driver, "/t")
