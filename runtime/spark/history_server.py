"""`sparkpoint history server`: Spark's own History Server (org.apache.spark.deploy.history.HistoryServer
from pyspark's jars, the runtime image's) over a local directory that `sparkpoint history sync`
fills from the store (docs/design.md §9, event logs). The command line is pure; `run` replaces the
process with the JVM, as `sparkpoint executor` does."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .executor_entry import java_binary, pyspark_jars_dir

MAIN = "org.apache.spark.deploy.history.HistoryServer"
PORT = 18080


def history_server_command(log_dir: str, port: int, jars_dir: str, java: str = "java", heap: str = "512m",
                           update_interval: str = "10s") -> list[str]:
    props = {
        "spark.history.fs.logDirectory": f"file:{os.path.abspath(log_dir)}",
        "spark.history.ui.port": str(port),
        "spark.history.fs.update.interval": update_interval,
        # The mirror owns the directory and the GC sidecar the store: the History Server deletes nothing.
        "spark.history.fs.cleaner.enabled": "false",
    }
    return [java, f"-Xmx{heap}", *(f"-D{k}={v}" for k, v in props.items()), "-cp", f"{jars_dir}/*", MAIN]


def run(log_dir: str, port: int, heap: str, env: Mapping[str, str] | None = None) -> int:
    from .identity import ensure_user_identity

    environ = dict(os.environ if env is None else env)
    ensure_user_identity(environ)  # the JVM needs a user name for this uid (random uids included)
    os.makedirs(log_dir, exist_ok=True)
    argv = history_server_command(log_dir, port, pyspark_jars_dir(), java_binary(environ), heap)
    os.execvpe(argv[0], argv, environ)  # noqa: S606 - become the History Server JVM
    return 1  # not reached
