"""A user name for the JVM under a uid without a passwd entry (OpenShift's restricted SCC gives a
pod a random uid such as 1000570000 in group 0).

Python gets its user name from $USER (set in the image), but the JVM asks the C library:
without an entry Spark's Ivy directory becomes `?/.ivy2` and Hadoop's login fails with
"invalid null input: name", so the driver does not start. The runtime image ships nss_wrapper;
before the JVM starts, this writes a passwd file with an entry for the current uid into $HOME (an
emptyDir in the pod; the root file system stays read-only) and points the JVM's environment at it.
"""

from __future__ import annotations

import glob
import logging
import os
import pwd
from collections.abc import MutableMapping
from pathlib import Path

log = logging.getLogger("sparkpoint.runtime")
NSS_WRAPPER = ("/usr/lib/*/libnss_wrapper.so", "/usr/lib/libnss_wrapper.so", "/usr/lib64/libnss_wrapper.so")


def _has_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def ensure_user_identity(env: MutableMapping[str, str] | None = None, uid: int | None = None,
                         gid: int | None = None, has_entry=_has_entry,  # type: ignore[no-untyped-def]
                         passwd: Path = Path("/etc/passwd")) -> Path | None:
    """The passwd file written (and set in `env`, os.environ by default), or None when the uid has
    an entry already or nss_wrapper is not installed (then a warning names the problem)."""
    env = os.environ if env is None else env
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    if has_entry(uid) or env.get("NSS_WRAPPER_PASSWD"):
        return None
    lib = next((hit for pattern in NSS_WRAPPER for hit in sorted(glob.glob(pattern))), None)
    if lib is None:
        log.warning("uid has no passwd entry and nss_wrapper is not installed: the JVM may not start",
                    extra={"uid": uid})
        return None
    home = env.get("HOME") or "/tmp"
    name = env.get("USER") or "sparkpoint"
    path = Path(home) / ".sparkpoint-passwd"
    path.write_text(passwd.read_text() + f"{name}:x:{uid}:{gid}:{name}:{home}:/usr/sbin/nologin\n")
    env["NSS_WRAPPER_PASSWD"], env["NSS_WRAPPER_GROUP"] = str(path), "/etc/group"
    env["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD"), lib) if p)
    log.info("passwd entry for the JVM via nss_wrapper", extra={"uid": uid, "user": name})
    return path
