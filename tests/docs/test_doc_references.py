"""The docs name only things that exist, and name every SPARKPOINT_* variable the code reads.

Checked in README.md, docs/*.md, e2e/README.md and the chart's README:
  - backticked repository paths (`runtime/checkpoint/freeze.py`) exist;
  - `make TARGET` names a target of the Makefile;
  - `sparkpoint CMD [SUB]` and `kubectl sparkpoint CMD` name sub-commands of the two CLIs' parsers;
  - SPARKPOINT_* variables are read somewhere in the code, scripts, Makefile or chart;
  - sparkpoint_* metric names are exported by the runtime, the GC sidecar or the operator;
and the reverse: every SPARKPOINT_* variable read by runtime/, operator/ or plugin/ is named in a doc.
Each checker is a plain function of text, so the tests at the end feed it bogus references.
Pure: no services, no network.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def doc_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "e2e" / "README.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "charts").glob("**/README*.md"))]
    return [f for f in files if f.is_file()]


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# --- extracting references ---------------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")


def code_spans(text: str) -> list[str]:
    """Inline code spans and the lines of fenced blocks (indented blocks too): where commands are."""
    spans = []
    for block in _FENCE.finditer(text):
        spans += block.group(0).splitlines()[1:-1]
    prose = _FENCE.sub("", text)
    spans += [m.group(1) for m in _INLINE.finditer(prose)]
    spans += [line.strip() for line in prose.splitlines() if line.startswith("    ") and line.strip()]
    return spans


def inline_spans(text: str) -> list[str]:
    return [m.group(1) for m in _INLINE.finditer(_FENCE.sub("", text))]


# --- paths ---------------------------------------------------------------------------------------------

_TOP_FILES = {"Makefile", "Dockerfile", "README.md", "setup.py", "pyproject.toml", "versions.env"}


def top_level_dirs(repo: Path = REPO) -> set[str]:
    """The repository's own top-level folders (not caches, the venv or work dirs)."""
    return {p.name for p in repo.iterdir() if p.is_dir() and (not p.name.startswith(".") or p.name in (".github", ".ci"))
            and not p.name.endswith(".egg-info")}


def image_names(dockerfile: Path = REPO / "Dockerfile") -> set[str]:
    """`sparkpoint/<target>` for the Dockerfile's final targets: image names, not paths."""
    return {f"sparkpoint/{t}" for t in re.findall(r"^FROM\s+\S+\s+AS\s+([a-z]+)\s*$", dockerfile.read_text(), re.M | re.I)}


def path_candidate(span: str) -> str | None:
    """The repository path a code span names, or None when it is not one (URLs, keys with
    placeholders, globs, image names, commands)."""
    span = span.strip().split("::", 1)[0].rstrip(".,;")
    if span.split(":", 1)[0] in image_names():
        return None
    if "…" in span or " " in span or re.search(r"[<>*{}$?:=@|'\"\\]", span) or span.startswith(("/", "~", "-", "#")):
        return None
    if "/" not in span and span not in _TOP_FILES:
        return None
    return span


def ignored(path: str, repo: Path) -> bool:
    """git ignores the path: something a run makes, not a file of the repository."""
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=repo,
                          capture_output=True, timeout=30).returncode == 0


def missing_paths(text: str, doc_dir: Path, repo: Path = REPO) -> list[str]:
    """Backticked paths that look like files of this repository but do not exist (relative to the
    repository root, or to the doc's own folder)."""
    tops = top_level_dirs(repo)
    missing = []
    for span in inline_spans(text):
        path = path_candidate(span)
        if path is None:
            continue
        if (repo / path).exists() or (doc_dir / path).exists() or ignored(path, repo):
            continue  # (an ignored path is made at run time, e.g. e2e/local/.state/: absent in a fresh clone)
        first = path.split("/", 1)[0]
        if first in (".", ".."):
            continue
        if first in tops or path in _TOP_FILES or (doc_dir / first).is_dir():
            missing.append(path)
    return missing


# --- make targets ----------------------------------------------------------------------------------------

def make_targets(makefile: Path = REPO / "Makefile") -> set[str]:
    targets = set()
    for line in makefile.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?![=:])", line)
        if m and not line.startswith(("\t", ".PHONY")):
            targets.update(m.group(1).split())
    return targets


def make_references(text: str) -> list[str]:
    """Targets of `make ...` in code spans (options and VAR=value skipped)."""
    found = []
    for span in code_spans(text):
        for m in re.finditer(r"(?:^|[\s(`;&|$])make((?:\s+\S+)+)", span):
            for word in m.group(1).split():
                if word.startswith("-") or "=" in word:
                    continue
                if re.fullmatch(r"[a-z][a-z0-9-]*", word):
                    found.append(word)
                break
    return found


def unknown_make_targets(text: str, targets: set[str]) -> list[str]:
    return [t for t in make_references(text) if t not in targets]


# --- CLI sub-commands ----------------------------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_tree() -> dict[str, dict[str, set[str]]]:
    """{'sparkpoint': {cmd: {sub, ...}}, 'kubectl sparkpoint': {cmd: set()}} from the real parsers."""
    from sparkpoint.plugin import cli as plugin_cli
    from sparkpoint.runtime.cli import build_parser

    runtime = {name: set(_subcommands(p)) for name, p in _subcommands(build_parser()).items()}
    plugin = {name: set(_subcommands(p)) for name, p in _subcommands(plugin_cli.parser()).items()}
    return {"sparkpoint": runtime, "kubectl sparkpoint": plugin}


_WORD = r"([a-z][a-z0-9-]*)(?=$|[\s|`\]\[)])"
_PLUGIN_CALL = re.compile(r"kubectl[ -]sparkpoint\s+" + _WORD)
_RUNTIME_CALL = re.compile(r"(?:^|[\s/(;&|])(?<!kubectl )(?<!kubectl-)sparkpoint\s+" + _WORD + r"(?:\s+" + _WORD + ")?")


def unknown_commands(text: str, tree: dict[str, dict[str, set[str]]]) -> list[str]:
    bad = []
    for span in code_spans(text):
        for m in _PLUGIN_CALL.finditer(span):
            if m.group(1) not in tree["kubectl sparkpoint"]:
                bad.append(f"kubectl sparkpoint {m.group(1)}")
        for m in _RUNTIME_CALL.finditer(span):
            if re.search(r"kubectl[ -]$", span[: m.start() + 1]):
                continue
            cmd, sub = m.group(1), m.group(2)
            if cmd not in tree["sparkpoint"]:
                bad.append(f"sparkpoint {cmd}")
            elif sub and tree["sparkpoint"][cmd] and sub not in tree["sparkpoint"][cmd]:
                bad.append(f"sparkpoint {cmd} {sub}")
    return bad


# --- environment variables -----------------------------------------------------------------------------

_ENV = re.compile(r"SPARKPOINT_[A-Z0-9_]*[A-Z0-9](_\*)?")
_CODE_SUFFIXES = {".py", ".sh", ".yaml", ".yml", ".tpl", ".txt", ".json", ".env", ".toml", ".cfg", ".java"}
_CODE_ROOTS = ("runtime", "operator", "plugin", "sparkpoint", "bench", "e2e", "tests", "scripts", "charts", "jvm",
               "image", ".github", ".ci")


def env_names(text: str) -> set[str]:
    return {m.group(0) for m in _ENV.finditer(text)}


def _code_files(roots: Iterable[str], repo: Path = REPO) -> Iterable[Path]:
    """Source files under `roots` (generated and hidden folders inside them skipped)."""
    for root in roots:
        base = repo / root
        if base.is_file():
            yield base
            continue
        # os.walk pruned, not rglob filtered: a hidden folder is never entered (a running local
        # cluster's e2e/local/.state changes under a walk and made it fail).
        for here, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("build", "__pycache__"))
            for name in sorted(files):
                f = Path(here) / name
                if f.suffix in _CODE_SUFFIXES or name in ("Makefile", "Dockerfile", "run"):
                    yield f


def code_env_names(roots: Iterable[str] = (*_CODE_ROOTS, "Makefile", "Dockerfile"), repo: Path = REPO) -> set[str]:
    names: set[str] = set()
    for f in _code_files(roots, repo):
        if f.resolve() == Path(__file__).resolve():
            continue  # this file's own examples name bogus variables
        names |= {n for n in env_names(f.read_text(errors="replace")) if not n.endswith("_*")}
    return names


def unknown_names(names: Iterable[str], known: set[str]) -> list[str]:
    """The names not in `known`; a name ending in `_*` is a prefix that must match a known one."""
    bad = []
    for name in sorted(names):
        if name.endswith("_*"):
            if not any(k.startswith(name[:-1]) for k in known):
                bad.append(name)
        elif name not in known:
            bad.append(name)
    return bad


def unknown_env_names(doc_names: set[str], code_names: set[str]) -> list[str]:
    return unknown_names(doc_names, code_names)


def undocumented_env_names(code_names: set[str], doc_names: set[str]) -> list[str]:
    prefixes = [n[:-1] for n in doc_names if n.endswith("_*")]
    return sorted(n for n in code_names if n not in doc_names and not any(n.startswith(p) for p in prefixes))


# --- metrics -------------------------------------------------------------------------------------------

def exported_metrics() -> set[str]:
    """Every sample name the runtime, the GC sidecar and the operator export (from their registries:
    the alert rules' tests read them the same way), plus each family's own name, which docs use."""
    sys.path.insert(0, str(REPO / "tests" / "alerts"))
    from promql_names import exported_names

    return exported_names(with_families=True)


def chart_series_names(chart: Path = REPO / "charts" / "sparkpoint") -> set[str]:
    """Names the chart itself makes: recording rules and the labels its monitors add (sparkpoint_job)."""
    names = set()
    for f in [*chart.glob("rules/*.yaml"), *chart.glob("templates/*.yaml")]:
        text = f.read_text()
        names |= set(re.findall(r"^\s*-?\s*record:\s*(\S+)", text, re.M))
        names |= set(re.findall(r"^\s*-?\s*(?:targetLabel|target_label):\s*(\S+)", text, re.M))
    return names


_METRIC = re.compile(r"(?<![\w/.-])(sparkpoint_[a-z0-9_]*[a-z0-9])(_\*)?(?![\w.-]*\.py)(?![\w-])")


def metric_references(text: str) -> set[str]:
    return {m.group(1) + (m.group(2) or "") for m in _METRIC.finditer(text)}


def unknown_metrics(text: str, known: set[str]) -> list[str]:
    return unknown_names(metric_references(text), known)


# --- the tests -----------------------------------------------------------------------------------------

DOCS = doc_files()


@pytest.fixture(scope="module")
def cli() -> dict[str, dict[str, set[str]]]:
    return cli_tree()


@pytest.fixture(scope="module")
def metrics() -> set[str]:
    return exported_metrics() | chart_series_names()


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_paths_exist(doc: Path) -> None:
    assert missing_paths(doc.read_text(), doc.parent) == [], f"{rel(doc)} names files that do not exist"


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_make_targets_exist(doc: Path) -> None:
    assert unknown_make_targets(doc.read_text(), make_targets()) == [], f"{rel(doc)} names unknown make targets"


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_cli_commands_exist(doc: Path, cli: dict[str, dict[str, set[str]]]) -> None:
    assert unknown_commands(doc.read_text(), cli) == [], f"{rel(doc)} names unknown CLI commands"


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_env_vars_are_read_by_code(doc: Path) -> None:
    assert unknown_env_names(env_names(doc.read_text()), code_env_names()) == [], \
        f"{rel(doc)} names SPARKPOINT_* variables nothing reads"


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_metrics_exist(doc: Path, metrics: set[str]) -> None:
    assert unknown_metrics(doc.read_text(), metrics) == [], f"{rel(doc)} names metrics nothing exports"


def test_every_env_var_the_code_reads_is_documented() -> None:
    documented = set().union(*(env_names(d.read_text()) for d in DOCS))
    assert undocumented_env_names(code_env_names(("runtime", "operator", "plugin")), documented) == []


# --- each check can fail -------------------------------------------------------------------------------

BOGUS = """
See `runtime/checkpoint/nonexistent.py` and `docs/nowhere.md`, but not `objects/<aa>/<sha>` or
`sparkpoint/operator:dev`. Run `make frobnicate` or `make CACHE=/x test`.

```bash
sparkpoint frobnicate --once
sparkpoint checkpoints explode ID
kubectl sparkpoint teleport JOB
```

Set SPARKPOINT_NO_SUCH_KNOB and watch `sparkpoint_bogus_seconds` and `sparkpoint_gc_*`.
"""


def test_checkers_report_bogus_references(cli: dict[str, dict[str, set[str]]], metrics: set[str]) -> None:
    assert missing_paths(BOGUS, REPO / "docs") == ["runtime/checkpoint/nonexistent.py", "docs/nowhere.md"]
    assert unknown_make_targets(BOGUS, make_targets()) == ["frobnicate"]
    assert sorted(unknown_commands(BOGUS, cli)) == ["kubectl sparkpoint teleport", "sparkpoint checkpoints explode",
                                                    "sparkpoint frobnicate"]
    assert unknown_env_names(env_names(BOGUS), code_env_names()) == ["SPARKPOINT_NO_SUCH_KNOB"]
    assert unknown_metrics(BOGUS, metrics) == ["sparkpoint_bogus_seconds"]
    code = code_env_names(("runtime",))
    assert undocumented_env_names(code | {"SPARKPOINT_SECRET_KNOB"}, code) == ["SPARKPOINT_SECRET_KNOB"]


def test_checkers_accept_real_references(cli: dict[str, dict[str, set[str]]], metrics: set[str]) -> None:
    real = ("`runtime/checkpoint/freeze.py` `make test` `sparkpoint checkpoints list` "
            "`kubectl sparkpoint status JOB` SPARKPOINT_S3_ENDPOINT `sparkpoint_input_rows_total`")
    assert missing_paths(real, REPO) == []
    assert unknown_make_targets(real, make_targets()) == []
    assert unknown_commands(real, cli) == []
    assert unknown_env_names(env_names(real), code_env_names()) == []
    assert unknown_metrics(real, metrics) == []
