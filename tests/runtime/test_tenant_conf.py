"""What a tenant's spec may not set (issue 41): Spark settings the operator owns for isolation, and
store policies that would reach past the store's prefix."""

from __future__ import annotations

import re

import pytest

from sparkpoint.runtime.spec import job as config
from sparkpoint.runtime.spec.pod_conf import ALLOWED_POD_CONF, MAX_CONF_KEYS, POD_CONF_MESSAGE
from sparkpoint.runtime.store.access_policy import main, store_history_policy

BASE = {"job": {"entrypoint": "m:f"}}


def test_the_ui_kill_switch_is_the_operators() -> None:
    with pytest.raises(config.SpecError, match=r"spark\.ui\.killEnabled is set by Sparkpoint: the UI is read-only"):
        config.parse_spec({**BASE, "spark": {"conf": {"spark.ui.killEnabled": "true"}}})


def test_a_store_wide_history_policy_needs_a_prefix(capsys) -> None:
    with pytest.raises(ValueError, match="needs a store prefix"):
        store_history_policy("ckpt", "")
    with pytest.raises(ValueError, match="needs a store prefix"):
        store_history_policy("ckpt", "/")
    with pytest.raises(SystemExit):
        main(["s3://ckpt", "--role", "history"])
    assert "needs a store prefix" in capsys.readouterr().err
    resources = [r for s in store_history_policy("ckpt", "prod")["Statement"] for r in s["Resource"]]
    assert "arn:aws:s3:::ckpt/prod/*/*/history/*" in resources


@pytest.mark.parametrize("key", [
    "spark.kubernetes.executor.secrets.store-keys", "spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY",
    "spark.kubernetes.executor.volumes.hostPath.root.mount.path", "spark.kubernetes.authenticate.executor.serviceAccountName",
    "spark.kubernetes.executor.label.sparkpoint.dev/job", "spark.kubernetes.node.selector.zone",
    "spark.kubernetes.executor.podNamePrefix", "spark.kubernetes.driver.pod.name", "spark.kubernetes.namespace"])
def test_a_conf_key_that_shapes_pods_is_refused_naming_it(key) -> None:
    with pytest.raises(config.SpecError, match=r"spark\.kubernetes\.\* keys shape pods .*: " + re.escape(key) + "$"):
        config.parse_spec({**BASE, "spark": {"conf": {"spark.sql.session.timeZone": "UTC", key: "x"}}})


def test_the_allowed_pod_conf_keys_only_size_or_pace_executors() -> None:
    conf = {key: "1" for key in ALLOWED_POD_CONF}
    assert config.parse_spec({**BASE, "spark": {"conf": conf}}).spark.conf == conf
    assert all(word not in key.lower() for key in ALLOWED_POD_CONF
               for word in ("secret", "volume", "account", "label", "annotation", "image", "node", "template",
                            "namespace", "name"))


def test_the_crds_rule_is_the_models(tmp_path) -> None:
    """The CRD carries the same allowlist (a map literal: constant cost per key) and bounds the map."""
    from sparkpoint.operator.crd import streamingjob as crd

    conf = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["spark"]["properties"]["conf"]
    assert conf["maxProperties"] == MAX_CONF_KEYS
    (rule,) = [r for r in conf["x-kubernetes-validations"] if "startsWith" in r["rule"]]
    assert all(f"'{key}': true" in rule["rule"] for key in ALLOWED_POD_CONF)
    assert rule["message"] == POD_CONF_MESSAGE and rule["messageExpression"].startswith(f"'{POD_CONF_MESSAGE}: ' + ")
