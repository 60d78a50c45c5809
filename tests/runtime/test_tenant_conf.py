"""What a tenant's spec may not set (issue 41): Spark settings the operator owns for isolation, and
store policies that would reach past the store's prefix."""

from __future__ import annotations

import pytest

from sparkpoint.runtime import config
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
