"""What "the same spec" means to the operator: a short key of the spec sections whose change needs a
new pod (an upgrade), stored in status (stableSpec, attemptSpec, rejectedSpec). Pure.

The key hashes only what differs from the defaults, so a field a newer operator adds (at its
default) leaves every stored key as it was: upgrading the operator restarts no job. Operators up to
and including the one that added `spark.ui` hashed the whole spec with its defaults; `is_spec` still
recognises their keys (with and without the fields added since), or the first rounds of a new
operator would begin an upgrade of every job.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import weakref
from typing import Any

from sparkpoint.runtime.spec import JobSpec

# Spec sections whose change needs no new pod (the operator alone reads them). upgradeMode says how
# to upgrade, so changing it alone is no upgrade either. restartNonce asks for a restart from the
# latest checkpoint, which the operator decides on its own (machine.py), not an upgrade. standby asks for
# a second pod beside the attempt (decisions/standby.py): turning it on or off never restarts the attempt,
# and as a whole section outside every key, keys written before it existed still name their job.
NOT_UPGRADES = ("state", "savepoint", "restart", "restoreFrom", "upgradeTimeout", "upgradeMode", "restartNonce",
                "standby")
# Fields inside hashed sections that the operator alone reads: checkpoint.triggerNonce asks for one
# checkpoint now. Left out of every key (a key written before the field existed lacks it too).
NOT_UPGRADE_FIELDS = (("checkpoint", "triggerNonce"),)
# Keys written before upgradeMode joined NOT_UPGRADES hashed it too.
_LEGACY_HASHED = ("upgradeMode",)
# Fields added while keys hashed the whole spec with its defaults (an older key lacks them), and the
# ones merged beside this change (spark.eventLog, gc.deltaRetention): a key of 4c58921 lacks those;
# job.sink.compaction (issue 27) and podTemplate (issue 40) are null unless set, and such keys lack them too.
_ADDED_TO_FULL_KEYS: tuple[tuple[str, ...], ...] = (("spark", "ui"), ("spark", "eventLog"), ("gc", "deltaRetention"),
                                                   ("job", "sink", "compaction"), ("podTemplate",))

# Fields added after keys stopped hashing defaults (issue 40's serviceAccountName, issue 39's
# gc.memory): null unless set.
_ADDED_AFTER_FULL_KEYS: tuple[tuple[str, ...], ...] = (("serviceAccountName",), ("gc", "memory"))

# Keys per live JobSpec object: a job's loop decides on the same parsed spec round after round
# (reconcile parses it again only when it changes), and dumping it each time cost CPU at 1,000 jobs.
_keys: dict[int, tuple[weakref.ref, str]] = {}
_legacy: dict[int, tuple[weakref.ref, frozenset[str]]] = {}


# The CRD's default spec.image until issue 40: the API server wrote it into every CR created without
# an image, and keys then left it out (it was the model's default too).
_OLD_DEFAULT_IMAGE = "sparkpoint:latest"


def spec_key(spec: JobSpec) -> str:
    """The image is always hashed: its default (sparkpoint/runtime:<version>) changes with each
    release, and the API server has written it into the CR, so a job keeps its image, and its key,
    across operator upgrades."""
    return _cached(_keys, spec, lambda: _hash(
        spec.model_dump(by_alias=True, mode="json", exclude_defaults=True) | {"image": spec.image}, NOT_UPGRADES))


def is_spec(stored: str | None, spec: JobSpec) -> bool:
    """A spec key from status names this spec (as this operator or an earlier one computed it)."""
    if stored is None:
        return False
    return stored == spec_key(spec) or stored in _cached(_legacy, spec, lambda: _legacy_keys(spec))


def _legacy_keys(spec: JobSpec) -> frozenset[str]:
    full = spec.model_dump(by_alias=True, mode="json")
    for path in _ADDED_AFTER_FULL_KEYS:  # no full key knew them: unset, they were not there
        if _get(full, path) is None:
            (_get(full, path[:-1]) or {}).pop(path[-1], None)
    defaults = JobSpec.model_validate({"job": {"entrypoint": "m:f"}}).model_dump(by_alias=True, mode="json")
    added = [path for path in _ADDED_TO_FULL_KEYS if _get(full, path) == _get(defaults, path)]
    keys = set()
    if spec.image == _OLD_DEFAULT_IMAGE:  # a key of the releases before issue 40, which left the default out
        without = spec.model_dump(by_alias=True, mode="json", exclude_defaults=True)
        without.pop("image", None)
        keys.add(_hash(without, NOT_UPGRADES))
    for n in range(len(added) + 1):
        for dropped in itertools.combinations(added, n):
            doc = json.loads(json.dumps(full))
            for path in dropped:
                _get(doc, path[:-1]).pop(path[-1], None)
            for hashed in ((), _LEGACY_HASHED):
                keys.add(_hash(doc, tuple(s for s in NOT_UPGRADES if s not in hashed)))
    return frozenset(keys)


def _without_fields(section: dict[str, Any], name: str) -> dict[str, Any]:
    drop = {field for sec, field in NOT_UPGRADE_FIELDS if sec == name}
    return {k: v for k, v in section.items() if k not in drop} if drop else section


def _get(doc: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        doc = doc.get(name) if isinstance(doc, dict) else None
    return doc


def _hash(doc: dict[str, Any], sections: tuple[str, ...]) -> str:
    doc = {k: (_without_fields(v, k) if isinstance(v, dict) else v) for k, v in doc.items() if k not in sections}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _cached(cache: dict[int, tuple[weakref.ref, Any]], spec: JobSpec, compute: Any) -> Any:
    known = cache.get(id(spec))
    if known is not None and known[0]() is spec:
        return known[1]
    value = compute()
    spec_id = id(spec)
    cache[spec_id] = (weakref.ref(spec, lambda _: cache.pop(spec_id, None)), value)
    return value
