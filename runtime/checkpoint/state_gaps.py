"""Whether a listed state set can restart: a pure decision on file names (docs/design.md §4; issue 42).

A restart after committed batch C loads, in every store directory, the newest snapshot of a version
<= C+1 and replays every changelog/delta after it up to C+1; and every stateful operator needs a
store for each state partition the offsets log names. A listing that misses a file (an NFS directory
listing is not covered by close-to-open consistency; a file purged or lost) would otherwise complete
a checkpoint, or start a local recovery, that cannot restart. The freeze and local recovery's
`check_restartable` both decide with `state_gaps` (through freeze.restart_set).

Directories with uuid-tagged names (state checkpoint format v2) are not checked here: the freeze
follows the lineage `commits/` records for them and refuses a version it cannot place.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

VERSIONED = re.compile(r"^(\d+)(?:_([A-Za-z0-9-]+))?\.(zip|changelog|delta|snapshot)$")
SNAPSHOT_KINDS = ("zip", "snapshot")


def chain_gaps(names: Iterable[str], max_version: int) -> tuple[int, list[int]]:
    """(base, missing): the newest snapshot <= max_version in one store directory (0: the empty
    store) and the versions after it, up to max_version, that have no changelog/delta."""
    snapshots: set[int] = set()
    deltas: set[int] = set()
    for name in names:
        m = VERSIONED.match(name)
        if m and int(m.group(1)) <= max_version:
            (snapshots if m.group(3) in SNAPSHOT_KINDS else deltas).add(int(m.group(1)))
    base = max(snapshots, default=0)
    return base, [v for v in range(base + 1, max_version + 1) if v not in deltas]


def _partition_of(rel_dir: str, op: str) -> int | None:
    parts = rel_dir.split("/")  # state/<operator>/<partition>[/<store name>]
    if len(parts) >= 3 and parts[0] == "state" and parts[1] == op and parts[2].isdigit():
        return int(parts[2])
    return None


def state_gaps(stores: Mapping[str, Collection[str]], max_version: int, *, partitions: int | None = None,
               operators: Iterable[str] = (), batch: int | None = None) -> list[str]:
    """Why the state set cannot restart at `max_version` (empty: it can). `stores`: each store
    directory (`state/<op>/<partition>[/<name>]`) with the versioned file names listed in it;
    `partitions`: the state partitions the offsets log of `batch` names (None: not checked);
    `operators`: the operator directories listed under `state/`."""
    reasons = []
    for rel_dir in sorted(stores):
        names = stores[rel_dir]
        if not names or any((m := VERSIONED.match(n)) and m.group(2) for n in names):
            continue
        base, missing = chain_gaps(names, max_version)
        if missing:
            shown = ", ".join(str(v) for v in missing[:5]) + (", ..." if len(missing) > 5 else "")
            reasons.append(f"{rel_dir}: state version {max_version} needs the changelogs/deltas after "
                           f"{'snapshot ' + str(base) if base else 'the empty store'}, and versions "
                           f"{shown} are not there")
    if partitions is not None:
        for op in sorted(set(operators), key=lambda o: (len(o), o)):
            have = {_partition_of(d, op) for d, names in stores.items() if names}
            missing_parts = [p for p in range(partitions) if p not in have]
            if missing_parts:
                reasons.append(f"state/{op}: the offsets log of batch {batch} names {partitions} state "
                               f"partitions and partitions {missing_parts[:5]} have no state files")
    return reasons
