"""kubectl sparkpoint list | status JOB | checkpoints JOB | executors JOB | events [JOB] | savepoint JOB |
checkpoint JOB | restart JOB | restore JOB --from ID | rescale JOB --partitions N --executors N | suspend JOB | resume JOB | logs JOB | ui JOB
[--port N] | history JOB [--port N | --list] [--server-namespace NS], with kubectl's --kubeconfig, --context,
-n/--namespace and -A, and -o name|json|yaml|wide on the commands that read. JOB is NAME or NAMESPACE/NAME."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from datetime import UTC, datetime

from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException
from tqdm import tqdm

from . import events as ev
from . import executors as ex
from . import format as fmt
from . import history, ui
from .args import check_output, parser, resolve_job
from .kube import Kube

SAVEPOINT_STEPS = {"Pending": 1, "InProgress": 2, "Completed": 3, "Failed": 3}
def names(obj: dict, kind: str) -> str:
    """-o name: `<kind>/<name>` per object, as kubectl prints them."""
    items = list(obj.get("items") or []) if "items" in obj else [obj]
    return "\n".join(f"{kind}/{(i.get('metadata') or {}).get('name')}" for i in items)


def _print(obj, output: str | None, text: str, kind: str = "streamingjob.sparkpoint.dev") -> None:
    if output == "name":
        print(names(obj, kind))
    else:
        print(fmt.render(obj, output) if output in ("json", "yaml") else text)


def _savepoint(kube: Kube, args) -> int:
    created = kube.create_savepoint(fmt.savepoint_body(args.job, args.name))
    name = created["metadata"]["name"]
    print(f"streamingjobsavepoint.sparkpoint.dev/{name} created", file=sys.stderr)
    if args.no_wait:
        return 0
    with tqdm(total=3, desc=name, unit="step", bar_format="{desc}: {bar} {postfix} [{elapsed}]",
              file=sys.stderr) as bar:
        def show(status: dict) -> None:
            state = status.get("state", "Pending")
            bar.n = SAVEPOINT_STEPS.get(state, 1)
            bar.set_postfix_str(state)
        obj = kube.wait_savepoint(name, args.timeout, show)
    status = obj.get("status") or {}
    if args.output == "name":
        print(names(obj, "streamingjobsavepoint.sparkpoint.dev"))
    elif args.output in ("json", "yaml"):
        print(fmt.render(obj, args.output))
    elif status.get("state") == "Completed":
        print(f"savepoint {status.get('id', name)} completed: {fmt.size(status.get('sizeBytes'))} "
              f"from {status.get('checkpoint')}")
    if status.get("state") == "Completed":
        return 0
    print(f"savepoint {name}: {status.get('state', 'Pending')}: {status.get('error') or 'timed out waiting'}",
          file=sys.stderr)
    return 1


def _ui(kube: Kube, args) -> int:
    try:
        pod = ui.ui_pod(kube.job(args.job))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    argv = ui.port_forward_argv(pod, kube.namespace, args.context, args.port)
    where = f"http://127.0.0.1:{args.port}/" if args.port else "the local port kubectl prints below"
    print(f"Spark UI of streamingjob {args.job} (pod {pod}): {where}  (Ctrl-C stops the port-forward)", flush=True)
    return ui.forward(argv)


def _executors(kube: Kube, args, now: datetime) -> int:
    job = kube.job(args.job)  # (a job that does not exist is an error, not an empty list)
    pods = kube.pods(ex.selector(args.job))
    _print({"apiVersion": "v1", "kind": "List", "items": pods}, args.output, fmt.table(*ex.executor_rows(pods, now)),
           kind="pod")
    if not pods and args.output not in ("json", "yaml", "name"):
        master = ((job.get("spec") or {}).get("spark") or {}).get("master", "local[2]")
        print(f"no executor pods of streamingjob {args.job} in namespace {kube.namespace}"
              + ("" if master == "k8s" else f" (spark.master is {master}: Spark runs in the job's pod)"),
              file=sys.stderr)
    return 0


def _applications(kube: Kube, args, service: str, port: int) -> bytes:
    """The History Server's /api/v1/applications: at --server-url, else through the API server."""
    if args.server_url:
        with urllib.request.urlopen(args.server_url.rstrip("/") + "/api/v1/applications", timeout=30) as answer:
            return bytes(answer.read())
    if args.service:
        svc = {"metadata": {"name": service}, "spec": {"selector": {"app.kubernetes.io/component": history.COMPONENT}}}
    else:
        svc = history.history_service_object(kube.services(args.server_namespace, history.SELECTOR), args.server_namespace)
    return kube.service_get(args.server_namespace, svc, port, "api/v1/applications")


def _history(kube: Kube, args) -> int:
    job = kube.job(args.job)  # the job must exist (a typo fails here, not in the browser)
    try:
        if args.service:
            service, port = args.service, history.PORT
        else:
            service, port = history.history_service(kube.services(args.server_namespace, history.SELECTOR),
                                                    args.server_namespace)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    note = history.event_log_note(job)
    if note:
        print(note, file=sys.stderr)
    if args.list:
        try:
            raw = _applications(kube, args, service, port)
        except (ValueError, OSError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        apps = history.job_applications(json.loads(raw), job)
        if args.output == "name":
            print("\n".join(f"application/{a['id']}" for a in apps))
        else:
            _print({"applications": apps}, args.output, fmt.table(*history.application_rows(apps)))
        if not apps:
            print(f"no applications of streamingjob {args.job} yet (the mirror syncs every historyServer.syncInterval, "
                  "the server reads it every 10 s)", file=sys.stderr)
        return 0
    argv = history.port_forward_argv(service, port, args.server_namespace, args.context, args.port)
    base = f"http://127.0.0.1:{args.port}/" if args.port else "the local port kubectl prints below"
    print(f"History Server (svc/{service} in {args.server_namespace}): {base}  (Ctrl-C stops the port-forward)\n"
          f"streamingjob {args.job}'s attempts are the applications named {history.app_prefix(job)}<n>"
          + (f"; the list: {base}api/v1/applications" if args.port else ""), flush=True)
    return ui.forward(argv)


NONCE_TRIES = 3
NONCE_EFFECT = {
    "restart": "the operator deletes the job's pod and starts its next attempt from the latest checkpoint (what "
               "ran since is replayed from the sources; no savepoint, no restart budget spent); a job not Running "
               "yet restarts once it is (Event RestartRequested)",
    "checkpoint": "the operator triggers a checkpoint as soon as the job is Running and no other is in flight "
                  "(Event CheckpointTriggered); `kubectl sparkpoint checkpoints {job}` lists it once complete",
}


def _bump_nonce(kube: Kube, args) -> None:
    """Read the job, patch its nonce one up on that version; a Conflict (the job changed between)
    reads it again, so a nonce is never set to a value another request already used."""
    for attempt in range(1, NONCE_TRIES + 1):
        patch, nonce = fmt.nonce_patch(kube.job(args.job), args.command)
        try:
            job = kube.patch_job(args.job, patch)
        except ApiException as error:
            if error.status == 409 and attempt < NONCE_TRIES:
                continue
            raise
        break
    field = ".".join(("spec", *fmt.NONCES[args.command]))
    phase = (job.get("status") or {}).get("phase")
    print(f"streamingjob.sparkpoint.dev/{args.job} {args.command} requested ({field} = {nonce}, phase now {phase}): "
          + NONCE_EFFECT[args.command].format(job=args.job))


def run(args, kube: Kube) -> int:
    now = datetime.now(UTC)
    if args.command == "list":
        items = kube.list_jobs(args.all_namespaces)
        headers, rows = fmt.job_rows(items, now, wide=args.output == "wide", namespaces=args.all_namespaces)
        _print({"apiVersion": "v1", "kind": "List", "items": items}, args.output, fmt.table(headers, rows))
    elif args.command == "status":
        job = kube.job(args.job)
        text = fmt.status_text(job, now)
        if ((job.get("spec") or {}).get("spark") or {}).get("master") == "k8s" and args.output is None:
            pods = kube.pods(ex.selector(args.job))
            text = "\n".join([text, *ex.status_section(pods, (job.get("status") or {}).get("attempt"), now)])
        _print(job, args.output, text)
    elif args.command == "executors":
        return _executors(kube, args, now)
    elif args.command == "checkpoints":
        st = kube.job(args.job).get("status") or {}
        doc = {"checkpoints": st.get("checkpoints") or [], "savepoints": st.get("savepoints") or []}
        if args.output == "name":
            print("\n".join([*(f"checkpoint/{c['id']}" for c in reversed(doc["checkpoints"])),
                             *(f"savepoint/{s['name']}" for s in reversed(doc["savepoints"]))]))
        else:
            _print(doc, args.output, fmt.table(*fmt.checkpoint_rows(st, now)))
    elif args.command == "events":
        found = ev.job_events(kube.events(args.all_namespaces), args.job, now, args.since)
        _print({"apiVersion": "v1", "kind": "List", "items": found}, args.output,
               fmt.table(*ev.event_rows(found, now, namespaces=args.all_namespaces)), kind="event")
        if not found and args.output is None:
            print(f"no events of {'streamingjob ' + args.job if args.job else 'sparkpoint resources'}"
                  + ("" if args.all_namespaces else f" in namespace {kube.namespace}")
                  + (" in that time" if args.since else " (the API server keeps them for an hour by default)"),
                  file=sys.stderr)
    elif args.command in ("suspend", "resume"):
        kube.patch_job(args.job, fmt.state_patch("suspended" if args.command == "suspend" else "running"))
        print(f"streamingjob.sparkpoint.dev/{args.job} {args.command} requested (spec.state patched)")
    elif args.command in fmt.NONCES:
        _bump_nonce(kube, args)
    elif args.command == "restore":
        job = kube.patch_job(args.job, fmt.restore_patch(args.source))
        phase = (job.get("status") or {}).get("phase")
        print(f"streamingjob.sparkpoint.dev/{args.job}: spec.restoreFrom = {args.source}; the next attempt "
              f"starts from it (phase now {phase})")
    elif args.command == "rescale":
        job = kube.patch_job(args.job, fmt.rescale_patch(args.partitions, args.executors))
        spark = (job.get("spec") or {}).get("spark") or {}
        phase = (job.get("status") or {}).get("phase")
        print(f"streamingjob.sparkpoint.dev/{args.job}: spec.spark.shufflePartitions = "
              f"{spark.get('shufflePartitions', '<default>')}, {fmt.executor_count(spark.get('executors'))}; an "
              f"upgrade per upgradeMode applies it (phase now {phase}; see status.lastRescale)")
    elif args.command == "savepoint":
        return _savepoint(kube, args)
    elif args.command == "ui":
        return _ui(kube, args)
    elif args.command == "history":
        return _history(kube, args)
    elif args.command == "logs":
        pod = (kube.job(args.job).get("status") or {}).get("pod")
        if not pod:
            print(f"streamingjob {args.job} has no current pod", file=sys.stderr)
            return 1
        out = kube.logs(pod, tail=args.tail, follow=args.follow, since=args.since)
        if args.follow:
            for chunk in out.stream():
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        else:
            sys.stdout.write(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        resolve_job(args)
        check_output(args)
        if args.kubeconfig:  # kubectl port-forward (ui, history) reads the same file
            os.environ["KUBECONFIG"] = args.kubeconfig
        if args.command == "restore":
            fmt.restore_patch(args.source)  # bad input fails before any call
        if args.command == "rescale":
            fmt.rescale_patch(args.partitions, args.executors)
        if args.command == "ui":
            ui.port_forward_argv("-", "-", None, args.port)
        if args.command == "history":
            history.port_forward_argv("-", 0, "-", None, args.port)
        return run(args, Kube(args.context, args.namespace, args.kubeconfig))
    except ConfigException as error:
        print(f"error: kubeconfig ({args.kubeconfig or '$KUBECONFIG or ~/.kube/config'}): {error}", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ApiException as error:
        job = getattr(args, "job", None)
        if error.status == 404:
            what = f"streamingjob {job} in namespace {args.namespace or 'of the context'}" if job else \
                "streamingjobs.sparkpoint.dev (is the CRD installed?)"
            print(f"error: not found: {what}", file=sys.stderr)
        elif error.status == 422:  # the CRD's validation: its message names the field
            print(f"error: rejected by the API server: {_api_message(error)}", file=sys.stderr)
        else:
            print(f"error: {error.reason} ({error.status})", file=sys.stderr)
        return 1


def _api_message(error: ApiException) -> str:
    import json

    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except ValueError:
        return str(error.reason)


if __name__ == "__main__":
    sys.exit(main())
