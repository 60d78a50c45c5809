"""Spec keys across operator releases: upgrading the operator must restart no job, so a key an
earlier release wrote into status still names the same spec, and a field a later release adds (at
its default) changes no key."""

from __future__ import annotations

import pytest

from sparkpoint.operator.decisions.spec_key import is_spec, spec_key
from sparkpoint.runtime.spec import JobSpec, parse_spec

MINIMAL = {"job": {"entrypoint": "m:f"}}
EDITED = {"image": "reg/x:1", "job": {"entrypoint": "m:f", "args": {"n": 3}},
          "spark": {"shufflePartitions": 8, "conf": {"spark.sql.x": "1"}}, "checkpoint": {"interval": "10s"},
          "upgradeMode": "stateless"}

# Keys the released operators wrote for these specs (status.tracking.stableSpec), computed by running
# their code: before spark.ui existed (c2bfa5a^), and after it (4c58921, which hashed spark.ui's default).
WRITTEN = [("c2bfa5a^", MINIMAL, "1e0d3d1db4a5131d"), ("c2bfa5a^", EDITED, "2c165edf2039863e"),
           ("4c58921", MINIMAL, "94819ddd5fc770a7"), ("4c58921", EDITED, "c92a266c7d04252c")]


# What the API server stored: those releases' CRD defaulted spec.image to sparkpoint:latest.
OLD_DEFAULT = {"image": "sparkpoint:latest"}


@pytest.mark.parametrize("release, doc, key", WRITTEN, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(WRITTEN)])
def test_a_key_an_earlier_release_wrote_names_the_same_spec(release: str, doc: dict, key: str) -> None:
    assert is_spec(key, parse_spec(OLD_DEFAULT | doc))


def test_a_key_written_before_the_image_default_changed_still_names_the_job() -> None:
    """Issue 40 changed the default image to sparkpoint/runtime:<version>; a job created earlier holds
    sparkpoint:latest (the old CRD's default, stored by the API server), which its key left out."""
    old_key = "0948b8e147775f28"  # spec_key of MINIMAL before issue 40 (the image at its default, left out)
    assert is_spec(old_key, parse_spec(OLD_DEFAULT | MINIMAL))
    assert not is_spec(old_key, parse_spec({"image": "sparkpoint/runtime:0.0.9"} | MINIMAL))


def test_the_key_holds_the_image_even_at_its_default() -> None:
    """The default image changes with each release: a job whose CR holds the old release's image
    (the API server wrote the default in) keeps its key under the new operator."""
    from sparkpoint.runtime.spec import DEFAULT_IMAGE

    at_default = parse_spec(MINIMAL)
    assert at_default.image == DEFAULT_IMAGE
    older = parse_spec({"image": "sparkpoint/runtime:0.0.9"} | MINIMAL)
    assert spec_key(at_default) != spec_key(older)
    assert spec_key(parse_spec({"image": DEFAULT_IMAGE} | MINIMAL)) == spec_key(at_default)


def test_an_earlier_key_does_not_name_another_spec() -> None:
    for _, doc, key in WRITTEN:
        other = parse_spec(doc | {"image": "reg/other:2"})
        assert not is_spec(key, other)
    ui_off = parse_spec(MINIMAL | {"spark": {"ui": {"enabled": False}}})
    assert not any(is_spec(key, ui_off) for _, _, key in WRITTEN)  # a non-default value is a change


def test_a_field_added_at_its_default_changes_no_key() -> None:
    """The key hashes what differs from the defaults: a spec parsed by a model that knows more fields
    (all at their defaults) has the key it had."""
    spec = parse_spec(EDITED)
    dumped = spec.model_dump(by_alias=True, mode="json")
    assert "ui" in dumped["spark"]
    assert spec_key(JobSpec.model_validate(dumped)) == spec_key(spec)
    assert spec_key(parse_spec(MINIMAL | {"spark": {"ui": {"enabled": True}}})) == spec_key(parse_spec(MINIMAL))


def test_a_change_that_needs_a_new_pod_changes_the_key_and_one_that_does_not_keeps_it() -> None:
    base = parse_spec(EDITED)
    assert spec_key(parse_spec(EDITED | {"image": "reg/x:2"})) != spec_key(base)
    assert spec_key(parse_spec(EDITED | {"spark": {"shufflePartitions": 6}})) != spec_key(base)
    assert spec_key(parse_spec(EDITED | {"restart": {"maxRestarts": 3}, "upgradeMode": "savepoint"})) == spec_key(base)


TEMPLATE = {"spec": {"tolerations": [{"key": "spark", "operator": "Exists"}]}}


def test_a_changed_pod_template_is_an_upgrade() -> None:
    base = parse_spec(EDITED)
    with_template = parse_spec(EDITED | {"podTemplate": TEMPLATE})
    assert spec_key(with_template) != spec_key(base)
    other = {"spec": {"tolerations": [{"key": "spark", "operator": "Exists"}], "priorityClassName": "high"}}
    assert spec_key(parse_spec(EDITED | {"podTemplate": other})) != spec_key(with_template)
    executors = {"spark": {"master": "k8s", "executors": {"instances": 2}},
                 "checkpoint": {"hotVolume": {"persistentVolumeClaim": {"claimName": "c"}}}}
    assert spec_key(parse_spec(MINIMAL | executors)) != spec_key(parse_spec(MINIMAL | executors | {"spark": {
        "master": "k8s", "executors": {"instances": 2, "podTemplate": TEMPLATE}}}))
    assert spec_key(parse_spec(MINIMAL | executors)) == spec_key(parse_spec(MINIMAL | executors | {"spark": {
        "master": "k8s", "executors": {"instances": 2, "podTemplate": {"spec": {"tolerations": []}}}}}))


@pytest.mark.parametrize("empty", [{}, {"metadata": {}}, {"metadata": {"labels": {}, "annotations": {}}},
                                   {"spec": {}}, {"spec": {"tolerations": [], "nodeSelector": {}, "volumes": []}}])
def test_a_template_that_differs_only_in_defaults_changes_no_key(empty) -> None:
    assert spec_key(parse_spec(EDITED | {"podTemplate": empty})) == spec_key(parse_spec(EDITED))
    full = TEMPLATE | {"metadata": {"labels": {}}, "spec": {**TEMPLATE["spec"], "initContainers": []}}
    assert spec_key(parse_spec(MINIMAL | {"podTemplate": full})) == spec_key(parse_spec(MINIMAL | {"podTemplate": TEMPLATE}))


def test_earlier_keys_still_name_a_spec_without_a_template_or_nonce() -> None:
    """podTemplate and restartNonce are null unless set: an earlier release's key is still this spec's."""
    for _, doc, key in WRITTEN:
        assert is_spec(key, parse_spec(OLD_DEFAULT | doc | {"podTemplate": {}}))


def test_a_restart_nonce_is_no_upgrade() -> None:
    """It restarts the job from its latest checkpoint (machine.py), not with an upgrade's savepoint."""
    assert spec_key(parse_spec(EDITED | {"restartNonce": 3})) == spec_key(parse_spec(EDITED))


def test_a_checkpoint_trigger_nonce_is_no_upgrade() -> None:
    """It asks for one checkpoint now (machine.py), from the running pod: not a new pod. Keys written
    before the field existed still name a spec that sets it."""
    with_nonce = {**EDITED, "checkpoint": {"interval": "10s", "triggerNonce": 7}}
    assert spec_key(parse_spec(with_nonce)) == spec_key(parse_spec(EDITED))
    for _, doc, key in WRITTEN:
        nonce = {"checkpoint": {**doc.get("checkpoint", {}), "triggerNonce": 2}}
        assert is_spec(key, parse_spec(OLD_DEFAULT | doc | nonce))
    # the section's other fields still are
    assert spec_key(parse_spec({**EDITED, "checkpoint": {"interval": "20s"}})) != spec_key(parse_spec(EDITED))
