"""The merge of a user's pod template (spec.podTemplate, spec.spark.executors.podTemplate) into a pod
the operator or Spark's backend builds. Pure functions, the rules of docs/design.md §9 ("Pod templates"):

- containers are matched by name: a template container named like one of ours (`runtime`, `gc`;
  `executor` in an executor pod) adds to it; any other is a sidecar, added after ours;
- in a matched container, env, envFrom, volumeMounts, ports and resources (other than cpu and memory)
  are added; securityContext keys the template sets replace ours (the restricted defaults stay
  otherwise); any other field is set where ours has none;
- at the pod level volumes, initContainers, tolerations, topologySpreadConstraints, imagePullSecrets
  and hostAliases are added, nodeSelector keys added, securityContext keys replace ours, and any
  other field is set where ours has none; labels and annotations are added;
- where ours and the template's name the same thing, ours wins: the spec model refuses such a
  template at admission (pod_template.py), so a merged pod never silently loses a user's field.
"""

from __future__ import annotations

import copy
from typing import Any

from .pod_template import EXECUTOR_CONTAINERS, JOB_CONTAINERS

ADDED_POD_LISTS = ("tolerations", "topologySpreadConstraints", "imagePullSecrets", "hostAliases")
# The pod-level fields that say where a pod may run: the hot-volume cleanup pod takes these (it must
# run where the job may, e.g. on nodes the job's tolerations admit).
SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName")


def _named(items: list[dict[str, Any]], key: str = "name") -> set[Any]:
    return {item.get(key) for item in items}


def _added(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """Ours, then theirs whose `keys` clash with none of ours."""
    taken = {key: _named(ours, key) for key in keys}
    return [*ours, *(t for t in theirs if not any(t.get(key) in taken[key] for key in keys if key in t))]


def merge_container(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(ours)
    for key, value in copy.deepcopy(theirs).items():
        if key == "env":
            merged["env"] = _added(merged.get("env", []), value, "name")
        elif key == "envFrom":
            merged["envFrom"] = [*merged.get("envFrom", []), *value]
        elif key == "volumeMounts":
            merged["volumeMounts"] = _added(merged.get("volumeMounts", []), value, "name", "mountPath")
        elif key == "ports":
            merged["ports"] = _added(merged.get("ports", []), value, "name", "containerPort")
        elif key == "resources":
            merged["resources"] = _merged_resources(merged.get("resources", {}), value)
        elif key == "securityContext":
            merged["securityContext"] = {**merged.get("securityContext", {}), **value}
        else:
            merged.setdefault(key, value)
    return merged


def _merged_resources(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(ours)
    for kind in ("requests", "limits"):
        if theirs.get(kind):
            merged[kind] = {**theirs[kind], **merged.get(kind, {})}
    if theirs.get("claims"):
        merged["claims"] = [*merged.get("claims", []), *theirs["claims"]]
    return merged


def merge_pod_spec(ours: dict[str, Any], theirs: dict[str, Any], containers: tuple[str, ...]) -> dict[str, Any]:
    merged = copy.deepcopy(ours)
    theirs = copy.deepcopy(theirs)
    by_name = {c.get("name"): c for c in theirs.pop("containers", [])}
    merged["containers"] = [merge_container(c, by_name.pop(c["name"])) if c["name"] in by_name else c
                            for c in merged.get("containers", [])]
    merged["containers"] += [c for name, c in by_name.items() if name not in containers]  # sidecars
    for key, value in theirs.items():
        if key in ("volumes", "initContainers"):
            merged[key] = _added(merged.get(key, []), value, "name")
        elif key in ADDED_POD_LISTS:
            merged[key] = [*merged.get(key, []), *value]
        elif key == "nodeSelector":
            merged[key] = {**value, **merged.get(key, {})}
        elif key == "securityContext":
            merged[key] = {**merged.get(key, {}), **value}
        else:
            merged.setdefault(key, value)
    return merged


def merge_pod(pod: dict[str, Any], template: dict[str, Any] | None,
              containers: tuple[str, ...] = JOB_CONTAINERS) -> dict[str, Any]:
    """`pod` (a Pod or a pod template) with the user's PodTemplateSpec mapping merged in."""
    if not template:
        return pod
    merged = copy.deepcopy(pod)
    meta = merged.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        theirs = (template.get("metadata") or {}).get(key) or {}
        if theirs:
            meta[key] = {**theirs, **meta.get(key, {})}
    merged["spec"] = merge_pod_spec(merged.get("spec", {}), template.get("spec") or {}, containers)
    return merged


def executor_template(job_template: dict[str, Any] | None,
                      executors_template: dict[str, Any] | None) -> dict[str, Any] | None:
    """What executors get: spark.executors.podTemplate when set, else spec.podTemplate with its
    `runtime` container's additions for the `executor` container (the job's code runs in both) and
    without its `gc` container's (executors have no GC sidecar)."""
    if executors_template:
        return executors_template
    if not job_template:
        return None
    template = copy.deepcopy(job_template)
    spec = template.get("spec") or {}
    if "containers" in spec:
        spec["containers"] = [{**c, "name": EXECUTOR_CONTAINERS[0]} if c.get("name") == "runtime" else c
                              for c in spec["containers"] if c.get("name") != "gc"]
    return template


def scheduling(template: dict[str, Any] | None) -> dict[str, Any]:
    """The template's pod-level scheduling fields (SCHEDULING_FIELDS) that it sets."""
    spec = (template or {}).get("spec") or {}
    return {key: copy.deepcopy(spec[key]) for key in SCHEDULING_FIELDS if key in spec}


def pinned_to_node(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """`pod` (a Pod or a pod template) with a required node affinity to exactly `node`: a hostPath
    is one node's disk, so whatever shares a job's hostPath directory runs there (docs/design.md §9,
    "hostPath on several nodes"). A template's own required terms keep their conditions, each
    narrowed to that node (terms are alternatives); its other affinity is kept."""
    pinned = copy.deepcopy(pod)
    on_node = {"key": "metadata.name", "operator": "In", "values": [node]}
    affinity = pinned.setdefault("spec", {}).setdefault("affinity", {})
    required = affinity.setdefault("nodeAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        term if on_node in term.get("matchFields", []) else {**term, "matchFields": [*term.get("matchFields", []), on_node]}
        for term in terms]
    return pinned
