"""runtime/spark/identity.py: a uid without a passwd entry gets one through nss_wrapper before the
JVM starts (the image test runs Spark as such a uid; these check the decision and the file)."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.runtime.spark import identity


def test_a_uid_without_an_entry_gets_one_in_home(tmp_path, monkeypatch):
    lib = tmp_path / "libnss_wrapper.so"
    lib.write_text("")
    monkeypatch.setattr(identity, "NSS_WRAPPER", (str(lib),))
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    env = {"HOME": str(tmp_path), "USER": "sparkpoint", "LD_PRELOAD": "/other.so"}
    written = identity.ensure_user_identity(env, uid=1000570000, gid=0, has_entry=lambda uid: False, passwd=passwd)
    assert written == tmp_path / ".sparkpoint-passwd"
    lines = written.read_text().splitlines()
    assert lines[0].startswith("root:") and lines[-1] == f"sparkpoint:x:1000570000:0:sparkpoint:{tmp_path}:/usr/sbin/nologin"
    assert env["NSS_WRAPPER_PASSWD"] == str(written) and env["NSS_WRAPPER_GROUP"] == "/etc/group"
    assert env["LD_PRELOAD"] == f"/other.so {lib}"
    # Idempotent: a second call (another session in the same process) changes nothing.
    assert identity.ensure_user_identity(env, uid=1000570000, gid=0, has_entry=lambda uid: False) is None


def test_nothing_to_do_for_a_known_uid_or_without_nss_wrapper(tmp_path, monkeypatch):
    env: dict[str, str] = {"HOME": str(tmp_path)}
    assert identity.ensure_user_identity(env, uid=185, gid=185, has_entry=lambda uid: True) is None
    monkeypatch.setattr(identity, "NSS_WRAPPER", (str(tmp_path / "missing.so"),))
    assert identity.ensure_user_identity(env, uid=7, gid=0, has_entry=lambda uid: False) is None
    assert env == {"HOME": str(tmp_path)} and not list(Path(tmp_path).iterdir())
