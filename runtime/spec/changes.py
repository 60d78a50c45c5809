"""Spec changes Spark cannot apply to a job's state, refused when they are made (docs/design.md §9).

A rule about a change needs the spec before it, which the spec model does not see: the API server
checks these as CEL transition rules (`oldSelf`, on the CRD's `spec`), and the operator, which also
runs where CEL is off, judges the same change with `state_change_refusal` against the spec the job
last ran (operator/decisions/rescale.py; the judgement is job.py's, which has the whole spec). Both use
the messages below.

- `spark.shufflePartitions` with `spark.stateStore: hdfs`: Spark's state repartition refuses the
  HDFS provider (STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER), so the new attempt
  would exit 4 and the upgrade roll back.
- `spark.stateStore` itself: Spark restores a checkpoint with the provider that wrote it (the offset
  log records it and wins over the session's setting), so the change would not take effect, and the
  runtime would record the wrong provider in its manifests.

Either is allowed in an edit that also starts without state: a new `restoreFrom.fresh` name, or
`upgradeMode: stateless`.
"""

from __future__ import annotations

from .rules import cel
from .sections import SparkSection

HDFS_PARTITIONS_MESSAGE = (
    "spec.spark.shufflePartitions cannot change while spec.spark.stateStore is hdfs: Spark cannot repartition "
    "the HDFS state store's state (STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER). Keep the "
    "partition count, or start without state in the same edit (a new spec.restoreFrom.fresh name, or "
    "upgradeMode: stateless)")
STATE_STORE_MESSAGE = (
    "spec.spark.stateStore cannot change for a job that has state: Spark restores a checkpoint with the state "
    "store that wrote it, so the change would not take effect. Keep the state store, or start without state "
    "in the same edit (a new spec.restoreFrom.fresh name, or upgradeMode: stateless)")

_PARTITIONS = SparkSection.model_fields["shuffle_partitions"].default
_STORE = SparkSection.model_fields["state_store"].default


def _spark(obj: str, field: str, default: object) -> str:
    value = f"'{default}'" if isinstance(default, str) else str(default)
    return f"(has({obj}.spark) && has({obj}.spark.{field}) ? {obj}.spark.{field} : {value})"


_WITHOUT_STATE = (
    "(has(self.upgradeMode) && self.upgradeMode == 'stateless') || "
    "(has(self.restoreFrom) && has(self.restoreFrom.fresh) && !(has(oldSelf.restoreFrom) && "
    "has(oldSelf.restoreFrom.fresh) && oldSelf.restoreFrom.fresh == self.restoreFrom.fresh))")

# On the CRD's spec (config.JobSpec); CEL evaluates a rule with oldSelf only on an update.
TRANSITION_RULES = [
    cel(f"{_spark('oldSelf', 'stateStore', _STORE)} != 'hdfs' || "
        f"{_spark('self', 'shufflePartitions', _PARTITIONS)} == {_spark('oldSelf', 'shufflePartitions', _PARTITIONS)}"
        f" || {_WITHOUT_STATE}", HDFS_PARTITIONS_MESSAGE, ".spark.shufflePartitions"),
    cel(f"{_spark('self', 'stateStore', _STORE)} == {_spark('oldSelf', 'stateStore', _STORE)} || {_WITHOUT_STATE}",
        STATE_STORE_MESSAGE, ".spark.stateStore"),
]
