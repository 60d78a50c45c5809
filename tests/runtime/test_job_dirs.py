"""A deleted StreamingJob's directories on a shared hot volume (runtime/service/job_dirs.py and
`sparkpoint hot-volume remove-job`): real directories, symlinks, a live job beside it, and the
runtime's removal of earlier jobs of its own name."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from sparkpoint.runtime.cli import main as cli_main
from sparkpoint.runtime.cli.hot_volume import ABSENT_EXIT
from sparkpoint.runtime.service.job_dirs import job_dir, remove_job_dir, remove_other_incarnations


def attempt_tree(root: Path, namespace: str, job: str, uid: str, *attempts: int) -> Path:
    """<root>/<ns>/<job>/<uid>/attempt-<n> with a hot dir's kind of content."""
    for n in attempts:
        state = root / namespace / job / uid / f"attempt-{n}" / "hot" / "state" / "0" / "1"
        state.mkdir(parents=True)
        (state / "1.changelog").write_bytes(os.urandom(64))
    return root / namespace / job / uid


def uids(n: int) -> list[str]:
    return sorted(str(uuid.uuid4()) for _ in range(n))


def files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_remove_job_dir_deletes_exactly_that_uid_and_keeps_live_neighbours(tmp_path):
    gone, live, other = uids(3)
    attempt_tree(tmp_path, "ns", "job", gone, 1, 2)
    attempt_tree(tmp_path, "ns", "other-job", live, 3)
    attempt_tree(tmp_path, "ns2", "job", other, 1)  # same name, another namespace
    before = {p: files(tmp_path / p) for p in (f"ns/other-job/{live}", f"ns2/job/{other}")}
    result = remove_job_dir(tmp_path, "ns", "job", gone)
    assert result.removed == [f"ns/job/{gone}"] and result.left == []
    assert not (tmp_path / "ns" / "job").exists()  # empty after it: removed too
    assert (tmp_path / "ns").is_dir()  # the namespace's directory stays
    assert {p: files(tmp_path / p) for p in before} == before
    again = remove_job_dir(tmp_path, "ns", "job", gone)  # idempotent, and says it found nothing
    assert again.to_json() == {"removed": [], "left": [], "absent": True}


def test_the_name_dir_stays_while_another_uid_lives_in_it(tmp_path):
    gone, new = uids(2)
    attempt_tree(tmp_path, "ns", "job", gone, 1)
    attempt_tree(tmp_path, "ns", "job", new, 1)
    assert remove_job_dir(tmp_path, "ns", "job", gone).removed == [f"ns/job/{gone}"]
    assert [p.name for p in (tmp_path / "ns" / "job").iterdir()] == [new]


@pytest.mark.parametrize("namespace, job, uid", [
    ("..", "job", "0" * 8 + "-0000-0000-0000-" + "0" * 12),
    ("ns", "../ns2", "0" * 8 + "-0000-0000-0000-" + "0" * 12),
    ("ns", "job", "../other"),
    ("ns", "job", "attempt-1"),
    ("ns", "Job", "0" * 8 + "-0000-0000-0000-" + "0" * 12),
])
def test_names_that_could_reach_elsewhere_are_refused(tmp_path, namespace, job, uid):
    with pytest.raises(ValueError, match="is not a valid"):
        job_dir(tmp_path, namespace, job, uid)


def test_a_symlink_on_the_way_is_never_followed(tmp_path):
    (uid,) = uids(1)
    elsewhere = tmp_path / "elsewhere"
    attempt_tree(elsewhere, "x", "y", uid, 1)
    root = tmp_path / "volume"
    (root / "ns").mkdir(parents=True)
    (root / "ns" / "job").symlink_to(elsewhere / "x" / "y", target_is_directory=True)
    result = remove_job_dir(root, "ns", "job", uid)
    assert result.removed == [] and result.left[0]["dir"] == "ns/job"
    assert files(elsewhere / "x" / "y" / uid)  # untouched


def test_the_command_says_what_it_removed_and_fails_on_leftovers(tmp_path, capsys):
    gone, other = uids(2)
    attempt_tree(tmp_path, "ns", "job", gone, 4)
    argv = ["hot-volume", "remove-job", "--root", str(tmp_path), "--namespace", "ns", "--job", "job"]
    assert cli_main([*argv, "--uid", gone, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"dir": f"ns/job/{gone}", "removed": [f"ns/job/{gone}"],
                                                   "left": [], "absent": False}
    (tmp_path / "ns" / "job").mkdir(parents=True)
    (tmp_path / "ns" / "job" / other).symlink_to(tmp_path, target_is_directory=True)
    assert cli_main([*argv, "--uid", other]) == 1  # a symlink where the uid dir should be: refused, reported
    assert "left on the volume" in capsys.readouterr().out
    assert cli_main([*argv, "--uid", "not-a-uid"]) == 1  # one clear error line, no traceback
    assert "not a valid uid" in capsys.readouterr().err


def test_the_runtime_removes_earlier_jobs_of_its_name_only(tmp_path):
    old1, old2, mine = uids(3)
    attempt_tree(tmp_path, "ns", "job", old1, 1, 2)
    attempt_tree(tmp_path, "ns", "job", old2, 7)
    current = attempt_tree(tmp_path, "ns", "job", mine, 1, 2) / "attempt-2"
    (tmp_path / "ns" / "job" / "notes").mkdir()  # not uid-shaped: not ours to remove
    neighbour, = uids(1)
    attempt_tree(tmp_path, "ns", "other", neighbour, 1)
    result = remove_other_incarnations(current)
    assert sorted(result.removed) == sorted([f"ns/job/{old1}", f"ns/job/{old2}"]) and result.left == []
    assert sorted(p.name for p in (tmp_path / "ns" / "job").iterdir()) == sorted([mine, "notes"])
    assert files(current)  # its own work dir (and its older attempt, attempt_dirs' business) untouched
    assert (tmp_path / "ns" / "job" / mine / "attempt-1").is_dir()
    assert files(tmp_path / "ns" / "other" / neighbour)


def test_a_work_dir_outside_the_volume_layout_removes_nothing(tmp_path):
    old, = uids(1)
    attempt_tree(tmp_path, "ns", "job", old, 1)
    assert remove_other_incarnations(tmp_path / "work").to_json() == {"removed": [], "left": [], "absent": False}
    # an attempt dir whose parent is not uid-shaped (a local run's layout)
    (tmp_path / "ns" / "job" / "local" / "attempt-1").mkdir(parents=True)
    assert remove_other_incarnations(tmp_path / "ns" / "job" / "local" / "attempt-1").removed == []
    assert (tmp_path / "ns" / "job" / old).is_dir()


def test_a_directory_that_is_not_there_is_its_own_outcome_not_a_removal(tmp_path, capsys):
    """On a hostPath volume of another node the job's directory is simply not there: the command
    must not say "removed" with exit 0, or the finalizer reports nothing (issue 42, finding 3)."""
    (gone,) = uids(1)
    argv = ["hot-volume", "remove-job", "--root", str(tmp_path), "--namespace", "ns", "--job", "job", "--uid", gone]
    assert cli_main([*argv, "--json"]) == ABSENT_EXIT != 0
    assert json.loads(capsys.readouterr().out) == {"dir": f"ns/job/{gone}", "removed": [], "left": [], "absent": True}
    assert cli_main(argv) == ABSENT_EXIT
    assert "not there" in capsys.readouterr().out
    attempt_tree(tmp_path, "ns", "job", gone, 1)
    assert cli_main([*argv, "--json"]) == 0  # there: removed, not absent
    assert json.loads(capsys.readouterr().out)["absent"] is False
