"""Spec changes Spark cannot apply to a job's state (runtime/spec/changes.py): the operator's
judgement, and the CRD's transition rules stating the same with the same words. The rules themselves
run in a real API server in e2e/test_streamingjob_crd.py."""

from __future__ import annotations

import pytest

from sparkpoint.operator.crd import streamingjob as crd
from sparkpoint.runtime.spec import (
    HDFS_PARTITIONS_MESSAGE,
    STATE_STORE_MESSAGE,
    TRANSITION_RULES,
    parse_spec,
    state_change_refusal,
)


def spec(store="rocksdb", partitions=4, **over):
    return parse_spec({"job": {"entrypoint": "m:f"}, "spark": {"stateStore": store, "shufflePartitions": partitions},
                       **over})


@pytest.mark.parametrize("before, after, refused", [
    (spec("hdfs", 4), spec("hdfs", 8), HDFS_PARTITIONS_MESSAGE),
    (spec("hdfs", 4), spec("hdfs", 4, image="sparkpoint:2"), None),  # other changes go on
    (spec("rocksdb", 4), spec("rocksdb", 8), None),  # RocksDB state repartitions (runtime/spark/rescale.py)
    (spec("rocksdb", 4), spec("hdfs", 4), STATE_STORE_MESSAGE),
    (spec("hdfs", 4), spec("rocksdb", 4), STATE_STORE_MESSAGE),
    (spec("hdfs", 4), spec("rocksdb", 8), STATE_STORE_MESSAGE),
    # Starting without state in the same edit makes either work.
    (spec("hdfs", 4), spec("hdfs", 8, restoreFrom={"fresh": "rescale-1"}), None),
    (spec("hdfs", 4), spec("rocksdb", 8, restoreFrom={"fresh": "rescale-1"}), None),
    (spec("hdfs", 4), spec("hdfs", 8, upgradeMode="stateless"), None),
    # ... but a fresh name the job already started from is its history, not a new start.
    (spec("hdfs", 4, restoreFrom={"fresh": "a"}), spec("hdfs", 8, restoreFrom={"fresh": "a"}), HDFS_PARTITIONS_MESSAGE),
    (spec("hdfs", 4, restoreFrom={"fresh": "a"}), spec("hdfs", 8, restoreFrom={"fresh": "b"}), None),
    (spec("hdfs", 4), spec("hdfs", 8, restoreFrom={"savepoint": "before"}), HDFS_PARTITIONS_MESSAGE),
])
def test_changes_spark_cannot_apply_to_the_state_are_refused(before, after, refused) -> None:
    assert state_change_refusal(before, after) == refused


def test_the_messages_name_the_field_why_and_what_to_do() -> None:
    assert HDFS_PARTITIONS_MESSAGE.startswith("spec.spark.shufflePartitions cannot change while "
                                              "spec.spark.stateStore is hdfs")
    assert "UNSUPPORTED_PROVIDER" in HDFS_PARTITIONS_MESSAGE
    assert STATE_STORE_MESSAGE.startswith("spec.spark.stateStore cannot change")
    for message in (HDFS_PARTITIONS_MESSAGE, STATE_STORE_MESSAGE):
        assert "spec.restoreFrom.fresh" in message and "upgradeMode: stateless" in message


def test_the_crd_carries_them_as_transition_rules_on_the_spec() -> None:
    schema = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = {r["message"]: r for r in schema["x-kubernetes-validations"]}
    for rule, message, field in ((TRANSITION_RULES[0], HDFS_PARTITIONS_MESSAGE, ".spark.shufflePartitions"),
                                 (TRANSITION_RULES[1], STATE_STORE_MESSAGE, ".spark.stateStore")):
        assert rules[message] == rule and rule["fieldPath"] == field and "oldSelf" in rule["rule"]
