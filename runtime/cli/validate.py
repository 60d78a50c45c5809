"""`sparkpoint validate FILE...`: check a job spec or StreamingJob manifest without running it.

Every bad field on a line of its own, with the same message the operator records for the spec
(both come from config.parse_spec); a YAML error names the file, line and column; a manifest of
another apiVersion or kind is refused. Exit 0 when every file is valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from sparkpoint.runtime.spec import API_GROUP, API_VERSION, KIND, SpecError, parse_document

API = f"{API_GROUP}/{API_VERSION}"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check job files (a StreamingJob spec or manifest) without running them")
    p.add_argument("files", nargs="+", metavar="FILE", help="a job spec or StreamingJob manifest (YAML)")
    p.set_defaults(handler=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    bad = 0
    for name in args.files:
        problems, summary = check_file(Path(name))
        for line in problems:
            print(f"{name}: {line}")
        if not problems:
            print(f"{name}: valid ({summary})")
        bad += bool(problems)
    return 1 if bad else 0


def check_file(path: Path) -> tuple[list[str], str]:
    """(problems, what the file holds): no problems means valid."""
    try:
        text = path.read_text()
    except OSError as err:
        return [f"cannot read: {err.strerror}"], ""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        return [yaml_problem(err)], ""
    if not docs:
        return ["empty: expected a StreamingJob spec or manifest"], ""
    problems, held = [], []
    for index, doc in enumerate(docs, 1):
        where = f"document {index}: " if len(docs) > 1 else ""
        found, summary = check_document(doc, default_name=path.stem)
        problems += [where + p for p in found]
        held.append(summary)
    return problems, ", ".join(held)


def check_document(doc: Any, default_name: str = "job") -> tuple[list[str], str]:
    if not isinstance(doc, dict):
        return [f"expected a StreamingJob spec or manifest (a mapping), got {type(doc).__name__}"], ""
    if "apiVersion" in doc or "kind" in doc:
        wrong = []
        if doc.get("apiVersion") != API:
            wrong.append(f"apiVersion: expected {API}, got {doc.get('apiVersion')!r}")
        if doc.get("kind") != KIND:
            wrong.append(f"kind: expected {KIND}, got {doc.get('kind')!r}")
        if wrong:
            return wrong, ""
    try:
        ident, _ = parse_document(doc, default_name=default_name)
    except SpecError as err:
        return err.problems, ""
    return [], (f"{KIND} {ident.namespace}/{ident.name}" if "kind" in doc else "a StreamingJob spec")


def yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    what = " ".join(str(p) for p in (getattr(err, "context", None), getattr(err, "problem", None)) if p) or str(err)
    return f"line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {what}" if mark else f"not valid YAML: {what}"
