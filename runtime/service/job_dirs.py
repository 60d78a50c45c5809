"""A deleted StreamingJob's directories on a shared hot volume (docs/design.md §9, "Deleted jobs").

Every attempt of a job with `checkpoint.hotVolume` works in
`<hot volume>/<namespace>/<job>/<uid>/attempt-<n>`, where `<uid>` is the StreamingJob's uid. Once
the job is deleted nothing reads `<uid>` again: a job created later under the same name has a new
uid, and every attempt restores from the store, never from an older directory. Two removers:

- the operator's finalizer, once the deleted job's pods and executors are gone, runs a pod that
  calls `remove_job_dir` for exactly that uid (`sparkpoint hot-volume remove-job`);
- the runtime of a job, right after it claimed its attempt, calls `remove_other_incarnations`:
  the siblings of its own `<uid>` under `<namespace>/<job>/` are earlier jobs of the same name. The
  API server refuses to create a StreamingJob while one of that name still exists, finalizer and
  all, so those were deleted and drained; this catches what a finalizer left (an operator without
  this step, a cleanup that gave up).

Only uid-shaped directory names are removed, never a symlink, nothing outside `<namespace>/<job>/`;
`<namespace>/<job>` itself goes only when empty (rmdir), and `<namespace>` is never removed (another
job of the namespace may be creating its directory under it at that moment). Best effort: what a
zombie executor writes meanwhile is reported as left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .attempt_dirs import attempt_number, remove_tree

log = logging.getLogger("sparkpoint.runtime")

UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a namespace or StreamingJob name


@dataclass
class Removal:
    removed: list[str] = field(default_factory=list)  # paths removed completely, relative to the volume
    left: list[dict[str, object]] = field(default_factory=list)  # {"dir", "errors"} of what stayed
    # The directory was not there at all: on a hostPath volume that usually means this node never
    # held it (the job ran on another node), so the caller must not read it as "removed".
    absent: bool = False

    def to_json(self) -> dict[str, object]:
        return {"removed": self.removed, "left": self.left, "absent": self.absent}


def job_dir(root: Path, namespace: str, job: str, uid: str) -> Path:
    """<root>/<namespace>/<job>/<uid>, refusing names that could reach elsewhere."""
    for what, value, pattern in (("namespace", namespace, NAME), ("job", job, NAME), ("uid", uid, UID)):
        if not pattern.fullmatch(value):
            raise ValueError(f"{what} {value!r} is not a valid {what} name")
    return root / namespace / job / uid


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _remove(root: Path, path: Path, result: Removal) -> None:
    errors = remove_tree(path)
    relative = str(path.relative_to(root))
    if errors or os.path.lexists(path):  # a zombie executor wrote into it meanwhile
        result.left.append({"dir": relative, "errors": errors[:3]})
    else:
        result.removed.append(relative)


def remove_job_dir(root: Path, namespace: str, job: str, uid: str) -> Removal:
    """Delete a deleted job's `<namespace>/<job>/<uid>` (absent: nothing removed, `absent` set), then
    `<namespace>/<job>` if that left it empty. Symlinks on the way are refused, not followed."""
    target = job_dir(root, namespace, job, uid)
    result = Removal()
    for step in (root / namespace, root / namespace / job, target):
        if step.is_symlink():
            result.left.append({"dir": str(step.relative_to(root)), "errors": ["a symlink: not followed"]})
            return result
    if _real_dir(target):
        _remove(root, target, result)
    else:
        result.absent = not os.path.lexists(target)
    _rmdir_if_empty(target.parent)
    return result


def _rmdir_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # not empty (a job of that name again, or leftovers), or gone
        path.rmdir()


def remove_other_incarnations(work_dir: Path) -> Removal:
    """From an attempt's work dir `<root>/<ns>/<job>/<uid>/attempt-<n>`: remove the uid-named
    siblings of `<uid>` (earlier, deleted jobs of the same name). Any other work dir: nothing."""
    result = Removal()
    uid_dir = work_dir.parent
    if attempt_number(work_dir) is None or not UID.fullmatch(uid_dir.name):
        return result
    name_dir = uid_dir.parent
    try:
        entries = sorted(os.scandir(name_dir), key=lambda e: e.name)
    except FileNotFoundError:
        return result
    for entry in entries:
        if entry.name != uid_dir.name and UID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            _remove(name_dir.parent.parent, Path(entry.path), result)
    if result.removed or result.left:
        log.info("deleted jobs' work dirs removed", extra=result.to_json())
    return result
