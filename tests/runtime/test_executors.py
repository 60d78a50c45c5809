"""spark.master k8s (issue 26): the spec rules, the driver's Spark settings, the executors' pod
template and the executor entry point's command line, all pure."""

from __future__ import annotations

import json

import pytest

from sparkpoint.runtime.spark import executor_entry, executors
from sparkpoint.runtime.spec import job as config

HOT = {"persistentVolumeClaim": {"claimName": "hot"}}


def _spec(spark: dict | None = None, checkpoint: dict | None = None) -> dict:
    return {"job": {"entrypoint": "a:b"}, "image": "sparkpoint/runtime:dev",
            "spark": {"master": "k8s", "executors": {"instances": 2, "cores": 1, "memory": "1Gi"}, **(spark or {})},
            "checkpoint": {"hotVolume": HOT, **(checkpoint or {})}}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"job": {"entrypoint": "a:b"}, "spark": {"executors": {"instances": 2}}},
     "spec.spark: executors needs master: k8s"),
    (_spec(spark={"master": "local[2]"}), "spec.spark: executors needs master: k8s"),
    ({"job": {"entrypoint": "a:b"}, "spark": {"master": "k8s"}}, "spec.spark: master k8s needs executors"),
    ({"job": {"entrypoint": "a:b"}, "spark": {"master": "k8s", "executors": {}}},
     "spec: spark.executors needs checkpoint.hotVolume"),
    (_spec(checkpoint={"hotVolume": {}}), "spec.checkpoint.hotVolume: set exactly one of persistentVolumeClaim"),
    (_spec(checkpoint={"hotVolume": {**HOT, "hostPath": {"path": "/x"}}}),
     "spec.checkpoint.hotVolume: set exactly one of persistentVolumeClaim"),
    (_spec(checkpoint={"hotVolume": {"hostPath": {"path": "relative"}}}), "spec.checkpoint.hotVolume.hostPath.path"),
    (_spec(checkpoint={"hotVolume": {"persistentVolumeClaim": {"claimName": "Bad_Name"}}}),
     "spec.checkpoint.hotVolume.persistentVolumeClaim.claimName"),
    (_spec(spark={"executors": {"instances": 0}}), "spec.spark.executors.instances"),
    (_spec(spark={"executors": {"memory": "256Mi"}}), "spec.spark.executors.memory: must be at least 512Mi"),
    (_spec(spark={"conf": {"spark.executor.instances": "4"}}),
     "spec.spark.conf: spark.executor.instances is set by Sparkpoint: set spec.spark.executors.instances"),
    (_spec(spark={"conf": {"spark.driver.host": "x"}}), "spec.spark.conf: spark.driver.host is set by Sparkpoint"),
])
def test_impossible_executor_specs_are_refused_naming_the_field(spec, expected) -> None:
    with pytest.raises(config.SpecError) as err:
        config.parse_spec(spec)
    assert str(err.value).startswith(expected), str(err.value)


def test_defaults_and_a_host_path_volume() -> None:
    spec = config.parse_spec(_spec(spark={"executors": {}}, checkpoint={"hotVolume": {"hostPath": {"path": "/h"}}}))
    assert (spec.spark.executors.instances, spec.spark.executors.cores, spec.spark.executors.memory) == (2, 1, "1Gi")
    assert spec.checkpoint.hot_volume.volume_source() == {"hostPath": {"path": "/h", "type": "Directory"}}


ENV = {"SPARKPOINT_POD_NAME": "clicks-3", "POD_IP": "10.1.2.3", "SPARKPOINT_ATTEMPT": "3",
       "SPARKPOINT_HOT_VOLUME_PATH": "/var/lib/sparkpoint", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
       "KUBERNETES_SERVICE_PORT": "443"}


def test_the_driver_runs_in_client_mode_on_its_pod_ip() -> None:
    driver = executors.driver_from_env(ENV, "team", "clicks")
    conf = executors.driver_conf(config.parse_spec(_spec(spark={"executors": {"instances": 3, "cores": 2,
                                                                              "memory": "1536Mi"}})),
                                 driver, "/w/template.json")
    assert conf["spark.master"] == "k8s://https://10.96.0.1:443"
    assert conf["spark.submit.deployMode"] == "client"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "10.1.2.3"
    assert (conf["spark.driver.port"], conf["spark.blockManager.port"]) == ("7078", "7079")
    assert conf["spark.kubernetes.namespace"] == "team"
    assert conf["spark.kubernetes.driver.pod.name"] == conf["spark.kubernetes.executor.podNamePrefix"] == "clicks-3"
    assert conf["spark.kubernetes.container.image"] == "sparkpoint/runtime:dev"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == "/w/template.json"
    assert (conf["spark.executor.instances"], conf["spark.executor.cores"], conf["spark.executor.memory"]) == \
        ("3", "2", "1536m")
    labels = {k.removeprefix("spark.kubernetes.executor.label."): v for k, v in conf.items()
              if k.startswith("spark.kubernetes.executor.label.")}
    assert labels["sparkpoint.dev/job"] == "clicks" and labels["sparkpoint.dev/attempt"] == "3"
    # not component=runtime: neither the job's Service nor the operator's pod index select executors
    assert labels["app.kubernetes.io/component"] == "executor"


def test_an_ipv6_api_server_is_bracketed_and_missing_variables_are_named() -> None:
    assert executors.driver_from_env({**ENV, "KUBERNETES_SERVICE_HOST": "fd00::1"}, "n", "j").api_server == \
        "https://[fd00::1]:443"
    with pytest.raises(ValueError, match="SPARKPOINT_POD_NAME, POD_IP"):
        executors.driver_from_env({k: v for k, v in ENV.items() if k not in ("SPARKPOINT_POD_NAME", "POD_IP")},
                                  "n", "j")


def test_executor_pods_are_restricted_and_mount_the_hot_volume_where_the_driver_does(tmp_path) -> None:
    spec = config.parse_spec(_spec())
    conf = executors.prepare_driver(spec, "team", "clicks", tmp_path, ENV)
    template = json.loads((tmp_path / executors.TEMPLATE_FILE).read_text())
    assert conf["spark.kubernetes.executor.podTemplateFile"] == str(tmp_path / executors.TEMPLATE_FILE)
    pod = template["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["name"] == conf["spark.kubernetes.executor.podTemplateContainerName"]
    sc = container["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["runAsUser"] == 185
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]] and container["workingDir"] == "/tmp"
    assert volumes[mounts["/var/lib/sparkpoint"]] == {"name": "hot", **HOT}
    assert template["metadata"]["labels"]["sparkpoint.dev/attempt"] == "3"


EXECUTOR_ENV = {"SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.1.2.3:7078", "SPARK_EXECUTOR_ID": "2",
                "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "spark-abc", "SPARK_EXECUTOR_POD_IP": "10.1.2.9",
                "SPARK_RESOURCE_PROFILE_ID": "0", "SPARK_EXECUTOR_POD_NAME": "clicks-3-exec-2",
                "SPARK_EXECUTOR_MEMORY": "1024m", "SPARK_JAVA_OPT_10": "-Dlast", "SPARK_JAVA_OPT_2": "-Dsecond",
                "SPARK_JAVA_OPT_0": "-XX:+IgnoreUnrecognizedVMOptions", "SPARK_JAVA_OPT_X": "-Dnot-an-option"}


def test_the_executor_entry_point_runs_sparks_executor_backend() -> None:
    argv = executor_entry.executor_command(EXECUTOR_ENV, "/site/pyspark/jars", "/jre/bin/java")
    backend = argv.index(executor_entry.BACKEND)
    assert argv[:backend] == ["/jre/bin/java", "-Xmx1024m", "-XX:+IgnoreUnrecognizedVMOptions", "-Dsecond",
                              "-Dlast", "-cp", "/site/pyspark/jars/*"]
    assert argv[backend + 1:] == ["--driver-url", "spark://CoarseGrainedScheduler@10.1.2.3:7078",
                                  "--executor-id", "2", "--cores", "1", "--app-id", "spark-abc",
                                  "--hostname", "10.1.2.9", "--resourceProfileId", "0",
                                  "--podName", "clicks-3-exec-2"]


def test_the_executor_entry_point_adds_the_conf_dir_and_names_what_is_missing() -> None:
    argv = executor_entry.executor_command({**EXECUTOR_ENV, "SPARK_CONF_DIR": "/opt/spark/conf",
                                            "SPARK_CLASSPATH": "/extra/*"}, "/j")
    assert argv[argv.index("-cp") + 1] == "/extra/*:/j/*:/opt/spark/conf"
    with pytest.raises(ValueError, match="SPARK_DRIVER_URL"):
        executor_entry.executor_command({k: v for k, v in EXECUTOR_ENV.items() if k != "SPARK_DRIVER_URL"}, "/j")
    assert executor_entry.java_binary({"JAVA_HOME": "/usr/lib/jvm/java-17"}) == "/usr/lib/jvm/java-17/bin/java"
    assert (executor_entry.pyspark_jars_dir().endswith("pyspark/jars"))


def test_an_authenticated_executor_gets_what_spark_needs_to_read_its_secret_file() -> None:
    """Without spark.master Spark's SecurityManager ignores the secret files, and the first
    connection reads spark.authenticate.secret.file (the executor failed every connection to its
    driver on the real node without both)."""
    auth = {**EXECUTOR_ENV, "SPARK_JAVA_OPT_3": "-Dspark.authenticate.secret.executor.file=/var/run/s/secret",
            "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    argv = executor_entry.executor_command(auth, "/j")
    options = argv[:argv.index("-cp")]
    assert "-Dspark.master=k8s://https://10.96.0.1:443" in options
    assert "-Dspark.authenticate.secret.file=/var/run/s/secret" in options
    ipv6 = executor_entry.executor_command({**auth, "KUBERNETES_SERVICE_HOST": "fd00::1"}, "/j")
    assert "-Dspark.master=k8s://https://[fd00::1]:443" in ipv6
    given = executor_entry.executor_command({**auth, "SPARK_JAVA_OPT_4": "-Dspark.master=k8s://https://a:1"}, "/j")
    assert [o for o in given if o.startswith("-Dspark.master=")] == ["-Dspark.master=k8s://https://a:1"]
    assert not [o for o in executor_entry.executor_command(EXECUTOR_ENV, "/j") if o.startswith("-Dspark.master")]


def test_the_sparkpoint_command_has_the_executor_entry() -> None:
    from sparkpoint.runtime.cli import build_parser

    assert build_parser().parse_args(["executor"]).handler.__name__ == "cmd_executor"
