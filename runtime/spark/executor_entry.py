"""`sparkpoint executor`: what an executor pod runs.

Spark's Kubernetes backend starts executor pods from the job's image with the single container
argument `executor` and no command, so the image's entry point (`tini -- sparkpoint`) makes that
`sparkpoint executor`. It passes everything through the environment (SPARK_DRIVER_URL,
SPARK_EXECUTOR_ID, ... and the JVM options as SPARK_JAVA_OPT_0, _1, ...); this turns that into the
JVM command line of Spark's executor backend and replaces the process with it, as Spark's own image
entry point does for `executor`. The same command runs in the runtime image and, on the local
cluster, from the virtualenv.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
# Backend flag -> the variable Spark's backend sets on the executor container.
ARGUMENTS = (("--driver-url", "SPARK_DRIVER_URL"), ("--executor-id", "SPARK_EXECUTOR_ID"),
             ("--cores", "SPARK_EXECUTOR_CORES"), ("--app-id", "SPARK_APPLICATION_ID"),
             ("--hostname", "SPARK_EXECUTOR_POD_IP"), ("--resourceProfileId", "SPARK_RESOURCE_PROFILE_ID"),
             ("--podName", "SPARK_EXECUTOR_POD_NAME"))
_JAVA_OPT = re.compile(r"SPARK_JAVA_OPT_([0-9]+)")


def java_options(env: Mapping[str, str]) -> list[str]:
    """SPARK_JAVA_OPT_<n> in numeric order (the executor's extraJavaOptions, Java module options
    included, one option per variable so no quoting is ever needed)."""
    numbered = sorted((int(m.group(1)), value) for key, value in env.items() if (m := _JAVA_OPT.fullmatch(key)))
    return [value for _, value in numbered]


def with_secret_file_conf(options: list[str], env: Mapping[str, str]) -> list[str]:
    """What an executor's JVM needs to read spark.authenticate's secret from its file (seen on the
    real node: without it every connection to the driver failed with "A secret key must be
    specified"). Spark's SecurityManager reads a secret file only when spark.master is a k8s:// URL,
    which the backend does not pass to executors; and the executor's first connection (fetching
    the driver's conf) reads spark.authenticate.secret.file, not the .executor.file the driver set.
    Both are added from the executor file's option, unless given."""
    prefix = "-Dspark.authenticate.secret.executor.file="
    secret_file = next((o[len(prefix):] for o in options if o.startswith(prefix)), None)
    if secret_file is None:
        return options
    added = []
    if not any(o.startswith("-Dspark.master=") for o in options):
        host = env.get("KUBERNETES_SERVICE_HOST") or "kubernetes.default.svc"
        host = f"[{host}]" if ":" in host else host
        added.append(f"-Dspark.master=k8s://https://{host}:{env.get('KUBERNETES_SERVICE_PORT') or 443}")
    if not any(o.startswith("-Dspark.authenticate.secret.file=") for o in options):
        added.append(f"-Dspark.authenticate.secret.file={secret_file}")
    return [*options, *added]


def executor_command(env: Mapping[str, str], jars_dir: str, java: str = "java") -> list[str]:
    missing = [name for _, name in ARGUMENTS if not env.get(name)]
    if missing:
        raise ValueError(f"not started by Spark's Kubernetes backend: missing {', '.join(missing)}")
    # -Xmx only (Spark's image also sets -Xms): the heap grows as tasks need it instead of being
    # committed at start; the pod's memory limit already includes Spark's overhead on top.
    heap = [f"-Xmx{env['SPARK_EXECUTOR_MEMORY']}"] if env.get("SPARK_EXECUTOR_MEMORY") else []
    # SPARK_CONF_DIR: Spark mounts the driver's conf files (log4j2 settings) there for executors.
    classpath = ":".join(p for p in (env.get("SPARK_CLASSPATH"), f"{jars_dir}/*", env.get("SPARK_CONF_DIR")) if p)
    args = [part for flag, name in ARGUMENTS for part in (flag, env[name])]
    return [java, *heap, *with_secret_file_conf(java_options(env), env), "-cp", classpath, BACKEND, *args]


def pyspark_jars_dir() -> str:
    """pyspark's own jars (the image's $SPARK_HOME/jars links there): found without importing it."""
    found = importlib.util.find_spec("pyspark")
    if found is None or not found.submodule_search_locations:
        raise ValueError("pyspark is not installed")
    return str(Path(next(iter(found.submodule_search_locations))) / "jars")


def java_binary(env: Mapping[str, str]) -> str:
    home = env.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def run_executor() -> int:
    from .identity import ensure_user_identity

    env = dict(os.environ)
    ensure_user_identity(env)  # the JVM needs a user name for this uid (random uids included)
    # Python workers (UDFs, foreachBatch in a task) run the interpreter this command runs on.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    argv = executor_command(env, pyspark_jars_dir(), java_binary(env))
    sys.stdout.flush()
    os.execvpe(argv[0], argv, env)  # noqa: S606 - the whole point: become the executor JVM
    return 1  # not reached
