"""Each image's entry points, run inside the image itself (buildah run --isolation=chroot):
help texts, the non-root user, what each image must and must not contain, and the runtime image
running a real job to its first checkpoints on MinIO, then its GC sidecar in dry-run mode."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from sparkpoint.runtime.checkpoint.catalog import list_checkpoint_ids
from sparkpoint.runtime.store import JobRef, open_store

TEST_BUCKET = "sparkpoint-test"


def test_operator_entry_point_help(operator_image):
    r = operator_image.run(["sparkpoint-operator", "--help"])
    assert r.returncode == 0, r.stderr
    assert "--metrics-port" in r.stdout


def test_operator_image_has_no_java_no_spark_no_build_tools(operator_image):
    r = operator_image.run(["python3", "-c", "import kopf, sparkpoint.operator.handlers"])
    assert r.returncode == 0, r.stderr
    for probe in (["python3", "-c", "import pyspark"], ["python3", "-m", "pip", "--version"],
                  ["sh", "-c", "command -v java || command -v gcc || command -v cc"]):
        assert operator_image.run(probe).returncode != 0, f"{probe} succeeded in the operator image"


def test_runtime_entry_points_help(runtime_image):
    r = runtime_image.run(["sparkpoint", "--help"])
    assert r.returncode == 0, r.stderr
    assert "run" in r.stdout and "gc" in r.stdout
    r = runtime_image.run(["sparkpoint", "gc", "--help"])
    assert r.returncode == 0 and "--dry-run" in r.stdout


def test_runtime_image_has_java_17_and_spark_layout(runtime_image):
    r = runtime_image.run(["java", "-version"])
    assert r.returncode == 0 and 'version "17' in r.stderr, r.stderr
    r = runtime_image.run(["sh", "-c", 'ls "$SPARK_HOME"/jars | grep -c "^spark-core" && pwd'])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "/opt/spark/work-dir"]
    assert runtime_image.run(["python3", "-m", "pip", "--version"]).returncode != 0


def test_runtime_image_has_the_pinned_kafka_connector(runtime_image):
    r = runtime_image.run(["sh", "-c", 'ls "$SPARKPOINT_SPARK_JARS_DIR"'])
    assert r.returncode == 0, r.stderr
    lock = (Path(__file__).resolve().parents[2] / "jars.lock").read_text().splitlines()
    wanted = {line.split()[2].rsplit("/", 1)[1] for line in lock if line.startswith("spark-kafka-")}
    assert len(wanted) == 4 and set(r.stdout.split()) == wanted


@pytest.mark.parametrize("fixture", ["operator_image", "runtime_image"])
def test_images_run_as_uid_185(fixture, request):
    image = request.getfixturevalue(fixture)
    assert image.config("{{.OCIv1.Config.User}}") == "185:185"
    r = image.run(["sh", "-c", "id -u; id -g; echo $HOME"])
    assert r.stdout.split() == ["185", "185", "/tmp"], r.stderr


ARBITRARY_UID = "1000570000:0"  # as OpenShift's restricted SCC assigns: no passwd entry, group 0


@pytest.mark.parametrize("fixture", ["operator_image", "runtime_image"])
def test_an_arbitrary_uid_has_a_user_name(fixture, request):
    """kopf's peering identity (getpass.getuser) crashed under a uid without a passwd entry."""
    image = request.getfixturevalue(fixture)
    r = image.run(["python3", "-c", "import getpass, os; print(os.getuid(), getpass.getuser())"], user=ARBITRARY_UID)
    assert r.returncode == 0 and r.stdout.split() == ["1000570000", "sparkpoint"], r.stderr


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_spark_starts_under_an_arbitrary_uid(runtime_image, scratch):
    """Under a uid without a passwd entry the JVM found no user name (Ivy's `?/.ivy2`, Hadoop's
    "invalid null input: name") and the driver did not start; nss_wrapper now gives it one."""
    spec = {"job": {"entrypoint": "sparkpoint.examples.windowed_aggregation:build",
                    "args": {"rows_per_batch": 50, "keys": 10}, "triggerInterval": "1s"},
            "spark": {"master": "local[1]"},
            "checkpoint": {"interval": "2s", "storage": {"url": "file:///tmp/store"}}}
    (scratch / "job.yaml").write_text(yaml.safe_dump(spec))
    run = runtime_image.run(
        ["sparkpoint", "run", "/tmp/job.yaml", "--namespace", "image", "--name", "anyuid",
         "--work-dir", "/tmp/work", "--port", "0", "--until-batch", "2"],
        volumes={scratch: "/tmp"}, user=ARBITRARY_UID, timeout=800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "passwd entry for the JVM via nss_wrapper" in run.stdout + run.stderr


@pytest.mark.minio
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_runtime_job_to_checkpoints_then_gc_dry_run(runtime_image, minio_env, scratch):
    """A small windowed job runs inside the image (as uid 185, /tmp a host dir) until batch 4,
    checkpointing every 2 s to MinIO; then `sparkpoint gc --once --dry-run` in the same image
    reports what retain=1 would delete and deletes nothing."""
    prefix = f"s3://{TEST_BUCKET}/image-{uuid.uuid4().hex[:8]}"
    job = JobRef(namespace="image", name="windowed")
    spec = {"job": {"entrypoint": "sparkpoint.examples.windowed_aggregation:build",
                    "args": {"rows_per_batch": 200, "keys": 50}, "triggerInterval": "1s"},
            "spark": {"master": "local[1]"},
            "checkpoint": {"interval": "2s", "retain": 5, "storage": {"url": prefix}}}
    (scratch / "job.yaml").write_text(yaml.safe_dump(spec))
    run = runtime_image.run(
        ["sparkpoint", "run", "/tmp/job.yaml", "--namespace", job.namespace, "--name", job.name,
         "--work-dir", "/tmp/work", "--port", "0", "--until-batch", "4"],
        env=minio_env, volumes={scratch: "/tmp"}, timeout=800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    store = open_store(prefix)
    checkpoints = list_checkpoint_ids(store, job)
    assert checkpoints, "the job in the image completed no checkpoint"

    gc = runtime_image.run(
        ["sparkpoint", "gc", "--store", prefix, "--job", f"{job.namespace}/{job.name}", "--retain", "1",
         "--grace", "10m", "--once", "--dry-run", "--json", "--no-progress"],
        env=minio_env, volumes={scratch: "/tmp"})
    assert gc.returncode == 0, gc.stderr
    report = json.loads(gc.stdout)
    assert report["dry_run"] is True
    assert len(report["deleted_manifests"]) == len(checkpoints) - 1
    assert list_checkpoint_ids(store, job) == checkpoints, "a dry run deleted checkpoints"
