"""What the operator relies on from the API server: service-account tokens that authenticate
(from the host and from inside a pod), RBAC that denies what a role does not grant, schema
validation of custom resources with messages naming the field, and a Ready node."""

from __future__ import annotations

import textwrap
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kube_helpers import container_status, python_container, wait_crd_established, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "e2e.sparkpoint.dev", "v1", "widgets"


def make_reader_account(api_client, namespace: str) -> None:
    """A service account that may only read ConfigMaps in its own namespace."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="reader")))
    rbac.create_namespaced_role(namespace, client.V1Role(
        metadata=client.V1ObjectMeta(name="configmap-reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["get", "list"])]))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="reader-reads-configmaps"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="configmap-reader"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace=namespace)]))


def status_of(call) -> int:
    try:
        call()
        return 200
    except ApiException as error:
        return error.status


def test_service_account_token_authenticates_and_rbac_denies(api_client, core, namespace):
    make_reader_account(api_client, namespace)
    token = core.create_namespaced_service_account_token("reader", namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    configuration = client.Configuration()
    configuration.host = api_client.configuration.host
    configuration.ssl_ca_cert = api_client.configuration.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token}"}
    as_reader = client.ApiClient(configuration)
    reader_core = client.CoreV1Api(as_reader)

    review = client.AuthenticationV1Api(as_reader).create_self_subject_review(client.V1SelfSubjectReview())
    assert review.status.user_info.username == f"system:serviceaccount:{namespace}:reader"
    wait_for("the role binding to take effect",
             lambda: status_of(lambda: reader_core.list_namespaced_config_map(namespace)) == 200, timeout=30)
    assert status_of(lambda: reader_core.list_namespaced_secret(namespace)) == 403
    assert status_of(lambda: reader_core.list_namespaced_config_map("default")) == 403
    assert status_of(lambda: reader_core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="nope")))) == 403

    configuration.api_key = {"authorization": "Bearer not-a-real-token"}
    assert status_of(lambda: client.CoreV1Api(client.ApiClient(configuration)).list_namespaced_config_map(
        namespace)) == 401


IN_POD_RBAC_CHECK = textwrap.dedent("""
    import os, sys
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException
    config.load_incluster_config()  # the projected token at /var/run/secrets/kubernetes.io/serviceaccount
    ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
    core = client.CoreV1Api()
    def status(call):
        try:
            call(); return 200
        except ApiException as error:
            return error.status
    user = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview()).status.user_info
    results = {"user": user.username, "list configmaps": status(lambda: core.list_namespaced_config_map(ns)),
               "list secrets": status(lambda: core.list_namespaced_secret(ns))}
    print(results, flush=True)
    ok = results == {"user": f"system:serviceaccount:{ns}:reader", "list configmaps": 200, "list secrets": 403}
    sys.exit(0 if ok else 1)
""")


def test_pod_service_account_token_is_mounted_and_scoped(api_client, namespace, pods):
    make_reader_account(api_client, namespace)
    pods.create("rbac-check", [python_container(IN_POD_RBAC_CHECK)], service_account_name="reader",
                restart_policy="OnFailure")
    pod = pods.wait_phase("rbac-check", "Succeeded", timeout=120)
    assert container_status(pod).state.terminated.exit_code == 0


@pytest.fixture(scope="module")
def widget_crd(api_client):
    extensions = client.ApiextensionsV1Api(api_client)
    name = f"{PLURAL}.{GROUP}"
    spec_schema = {
        "type": "object", "required": ["mode"],
        "properties": {"replicas": {"type": "integer", "minimum": 1},
                       "mode": {"type": "string", "enum": ["fast", "safe"]}},
    }
    body = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": spec_schema}}}}]},
    }
    if status_of(lambda: extensions.read_custom_resource_definition(name)) == 404:
        extensions.create_custom_resource_definition(body)

    wait_crd_established(extensions, name)
    yield name
    extensions.delete_custom_resource_definition(name)


def create_widget(api_client, namespace: str, spec: dict) -> None:
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
        "metadata": {"name": f"w-{uuid.uuid4().hex[:8]}"}, "spec": spec})


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"mode": "fast", "replicas": "three"}, "spec.replicas", "integer"),
    ({"mode": "turbo"}, "spec.mode", "supported values"),
    ({"replicas": 2}, "spec.mode", "required"),
    ({"mode": "safe", "replicas": 0}, "spec.replicas", "greater than or equal to 1"),
])
def test_invalid_custom_resource_is_rejected_naming_the_field(api_client, namespace, widget_crd, spec, field, words):
    with pytest.raises(ApiException) as rejected:
        create_widget(api_client, namespace, spec)
    assert rejected.value.status == 422
    assert field in rejected.value.body and words in rejected.value.body.lower(), rejected.value.body


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replicas=st.integers(min_value=-5, max_value=10_000), mode=st.sampled_from(["fast", "safe", "Fast", ""]))
def test_schema_validation_matches_the_schema(api_client, namespace, widget_crd, replicas, mode):
    valid = replicas >= 1 and mode in ("fast", "safe")
    try:
        create_widget(api_client, namespace, {"replicas": replicas, "mode": mode})
        accepted = True
    except ApiException as error:
        assert error.status == 422, error.body
        accepted = False
    assert accepted == valid, f"replicas={replicas} mode={mode!r}"


def test_nodes_are_ready_with_fresh_leases(api_client, core):
    nodes = core.list_node().items
    assert nodes, "the cluster has no node"
    leases = client.CoordinationV1Api(api_client)
    for node in nodes:
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True", f"node {node.metadata.name} is not Ready: {ready.message}"
        lease = leases.read_namespaced_lease(node.metadata.name, "kube-node-lease")
        age = (datetime.now(UTC) - lease.spec.renew_time).total_seconds()
        assert age < lease.spec.lease_duration_seconds, f"lease of {node.metadata.name} is {age:.0f}s old"
