"""Old attempts' work dirs on a shared hot volume, removed by the next attempt (docs/design.md §9).

With `checkpoint.hotVolume` every attempt works in its own directory,
`<hot volume>/<namespace>/<job>/<uid>/attempt-<n>` (operator/kube/builders.py `work_dir`), so an executor
of an old attempt that outlives its driver can only write into the old attempt's directory. Nothing
ever reads an older attempt's directory again: a new attempt (a new pod) starts with an empty work
dir and restores from the store. So the runtime of attempt n, once it has claimed its attempt in the
store's fence (an older attempt can then no longer commit a checkpoint or publish output from the
files being removed), deletes its siblings `attempt-<m>` with m < n: never its own, never a newer
one (an old attempt's runtime restarted in place late removes nothing of a newer attempt), never a
symlink, nothing outside the parent. A work dir not named `attempt-<n>` (the pod's emptyDir, a local
run) has no siblings to remove.

Best effort: a zombie executor may still be writing into an old directory while it is removed (its
files reappear, a directory is not empty yet); what is left is logged and removed by the next
attempt. Removal never fails the start. What only an old dir holds, the not-yet-uploaded end of its
event log (the minute before a crash, the part that explains it), is uploaded first; a dir whose
upload fails is left whole and tried again by the next attempt.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("sparkpoint.runtime")

# attempt-<n>, or attempt-<n>-standby: a standby's own dir (operator/kube/builders.py work_dir), which is
# attempt n's once promoted, and a stale one's to remove like any older attempt's.
ATTEMPT_DIR = re.compile(r"attempt-([0-9]{1,9})(?:-standby)?")


def attempt_number(work_dir: Path) -> int | None:
    """n of a work dir named attempt-<n>; None for any other name."""
    match = ATTEMPT_DIR.fullmatch(work_dir.name)
    return int(match.group(1)) if match else None


def older_attempt_dirs(work_dir: Path) -> list[Path]:
    """The sibling directories of attempts strictly older than work_dir's, oldest first."""
    current = attempt_number(work_dir)
    if current is None:
        return []
    try:
        entries = list(os.scandir(work_dir.parent))
    except FileNotFoundError:
        return []
    older = []
    for entry in entries:
        number = attempt_number(Path(entry.name))
        if number is not None and number < current and entry.is_dir(follow_symlinks=False):
            older.append((number, Path(entry.path)))
    return [path for _, path in sorted(older)]


def remove_tree(path: Path) -> list[str]:
    """rmtree that never raises (a directory, never a symlink's target: rmtree refuses a symlink);
    returns the errors other than files that vanished meanwhile (a zombie removed them itself)."""
    errors: list[str] = []

    def note(_func: object, failed_path: str, exc_info: tuple) -> None:
        if not isinstance(exc_info[1], FileNotFoundError):
            errors.append(f"{failed_path}: {exc_info[1]}")

    shutil.rmtree(path, onerror=note)  # (Python 3.11: no onexc yet)
    return errors


def remove_older_attempt_dirs(work_dir: Path, save: Callable[[Path], bool] = lambda _: True) -> list[str]:
    """Delete the work dirs of older attempts (call only once this attempt holds the store's fence).
    `save(dir)` first puts in the store what only the old dir holds (its event log's last minutes,
    event_log.save_leftovers) and says whether that worked: a dir it could not save is left whole
    for the next attempt. Returns the names removed completely; what could not be removed is logged
    and left."""
    removed: list[str] = []
    left: list[dict[str, object]] = []
    for path in older_attempt_dirs(work_dir):
        try:
            saved = save(path)
        except Exception as exc:  # noqa: BLE001 - never fails the start; the dir stays
            saved, exc_text = False, str(exc)
        else:
            exc_text = ""
        if not saved:
            left.append({"dir": path.name, "errors": [f"not saved yet {exc_text}".strip()]})
            continue
        errors = remove_tree(path)
        if errors or path.exists():  # a zombie executor wrote into it meanwhile
            left.append({"dir": path.name, "errors": errors[:3]})
        else:
            removed.append(path.name)
    if removed or left:
        log.info("older attempts' work dirs removed", extra={"removed": removed, "left": left})
    return removed
