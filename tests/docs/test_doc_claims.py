"""The docs' claims, figures, tables and links stay true (issue 44's classes of stale statements).

test_doc_references.py checks that the things docs name exist (paths, make targets, commands,
variables, metrics). This file adds the classes it does not catch:
  - claims about what has or has not run ("has not run yet", "no Docker here"): each one is listed
    below with the evidence that it is still true, so a claim added or left behind fails here;
  - figures: README's setup times and test counts quote e2e/README.md, docs/operator.md's memory
    figure quotes docs/benchmarks.md;
  - tables: README's make-target table names every target of the Makefile, its layout table every
    top-level folder and every file of examples/;
  - links: relative Markdown links resolve, to a heading when they name one;
  - paths named in the comments of pyproject.toml, the Makefile and the Dockerfile exist.
Each checker is a plain function of text; the tests at the end feed them stale text. Pure.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_doc_references import REPO, doc_files, ignored, make_targets, rel, top_level_dirs

DOCS = doc_files() + [REPO / "e2e" / "kind" / "README.md"]

# --- claims about what has or has not run ----------------------------------------------------------------

_CLAIM = re.compile(
    r"\b(?:has|have|had) not (?:yet )?(?:been )?(?:run|ran|built|verified|tested|timed)\b"
    r"|\bnot yet (?:been )?(?:run|built|verified|tested|timed)\b"
    r"|\bnever (?:ran|been run)\b"
    r"|\b(?:was|were|is|are) not (?:yet )?(?:run|verified|tested|timed)\b"
    r"|\bnot verified\b|\bno docker here\b|\bwritten but\b|\bstill owed\b|\bnot (?:yet )?built\b(?! twice)"
    r"|\b(?:admits|accepts) but does not enforce\b",
    re.I)

# (doc, a phrase of the sentence) -> why the claim is still true. Remove an entry when its claim goes.
CLAIMS_WITH_EVIDENCE: dict[tuple[str, str], str] = {
    ("README.md", "what was and was not verified"):
        "a pointer to docs/image.md's two lists, not a claim of its own",
    ("docs/image.md", "Not verified:"):
        "the list under it: a Docker/BuildKit build, the official python base, other architectures, "
        "scanning and signing; none of them runs on this machine (no Docker engine, amd64 only)",
    ("docs/benchmarks.md", "several uploaders under one pending marker; not built"):
        "a design alternative the benchmark discusses; the runtime has one uploader per checkpoint",
    ("docs/benchmarks.md", "the batch that has not run yet"):
        "describes Spark's trigger semantics, not whether a test ran",
    ("docs/benchmarks.md", "Deleting the downloaded tree is not timed"):
        "the restore benchmark times the download and verification only",
    ("e2e/kind/README.md", "An uninterrupted `make e2e-kind` has not been timed"):
        "the next paragraph: the one uninterrupted try (2026-11-26, load 35-49) was stopped after failures",
    ("e2e/kind/README.md", "A full run on a quiet machine is still owed"):
        "e2e/kind/README.md's own account of the 2026-11-26 runs: the CI tier ran on kind only in pieces",
}


_BLOCK_START = re.compile(r"^\s*(?:\||#|[-*] |\d+\. |```)")


def sentences(text: str) -> list[str]:
    """Sentences of the prose; a heading, list item or table row is a unit of its own."""
    units: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            units.append([])
        elif _BLOCK_START.match(line) or not units:
            units.append([line])
        else:
            units[-1].append(line)
    flat = [" ".join(" ".join(u).split()) for u in units if u]
    return [s for unit in flat for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`*(])", unit)]


def claims(text: str) -> list[str]:
    """The sentences that claim something has not run, was not verified or cannot run here."""
    return [s for s in sentences(text) if _CLAIM.search(s)]


def unproven_claims(doc: str, text: str, evidence: dict[tuple[str, str], str]) -> list[str]:
    phrases = [phrase for (name, phrase) in evidence if name == doc]
    return [s for s in claims(text) if not any(p in s for p in phrases)]


def stale_evidence(texts: dict[str, str], evidence: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
    """Entries whose claim is gone (or no longer reads as a claim): the list must shrink with the docs."""
    return [(doc, phrase) for (doc, phrase) in evidence
            if not any(phrase in s for s in claims(texts.get(doc, "")))]


# --- figures ---------------------------------------------------------------------------------------------

_DURATION = re.compile(r"\b\d+ min(?: \d+ s)?\b|\b\d+(?:\.\d+)? minutes\b")
_PASSED = re.compile(r"\b\d[\d,]* passed\b")
_MIB = re.compile(r"\b\d+ MiB\b")


def quick_start(readme: str) -> str:
    return readme.split("## Quick start", 1)[1].split("\n### ", 1)[0]


def unquoted_figures(text: str, source: str, pattern: re.Pattern[str]) -> list[str]:
    """Figures of `text` that `source` (where they were measured) does not state."""
    flat = re.sub(r"\s+", " ", source)
    return [m.group(0) for m in pattern.finditer(re.sub(r"\s+", " ", text)) if m.group(0) not in flat]


# --- tables ----------------------------------------------------------------------------------------------

# Targets a user never calls by name: `help` prints the table's short form.
_UNLISTED_TARGETS = {"help"}


def table(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def make_table_targets(readme: str) -> set[str]:
    """Targets the make-target table names: `make a` / `b` / `c` in the first column."""
    names = set()
    for row in re.findall(r"^\| (.+?) \|", table(readme, "Make targets"), re.M):
        names |= set(re.findall(r"`(?:make )?([a-z][a-z0-9-]*)`", row))
    return names


def phony_targets(makefile: Path = REPO / "Makefile") -> set[str]:
    line = re.search(r"^\.PHONY:(.*)$", makefile.read_text(), re.M)
    assert line, "the Makefile has no .PHONY line"
    return set(line.group(1).split())


def layout_names(readme: str) -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", table(readme, "Layout"), re.M))


# --- links ---------------------------------------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+?)\s*#*$", _FENCE.sub("", markdown), re.M)}


def broken_links(text: str, doc_dir: Path) -> list[str]:
    """Relative links whose file does not exist, or whose #anchor is no heading of the Markdown it names."""
    bad = []
    for m in _LINK.finditer(_FENCE.sub("", text)):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        file = (doc_dir / path).resolve() if path else None
        if file is not None and not file.exists():
            bad.append(target)
            continue
        if anchor and (file is None or file.suffix == ".md"):
            markdown = file.read_text() if file is not None else text
            if anchor not in anchors(markdown):
                bad.append(target)
    return bad


# --- paths in the build files' comments ------------------------------------------------------------------

_COMMENT_PATH = re.compile(r"(?<![\w/.-])((?:[a-z]+/)+[\w.-]+\.(?:md|py|sh|yaml|txt|json|toml))\b")


def missing_comment_paths(text: str, repo: Path = REPO) -> list[str]:
    tops = top_level_dirs(repo)
    found = []
    for line in text.splitlines():
        if "#" not in line:
            continue
        for m in _COMMENT_PATH.finditer(line.split("#", 1)[1]):
            path = m.group(1)
            if path.split("/", 1)[0] in tops and not (repo / path).exists():
                found.append(path)
    return found


# --- the tests -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_claim_of_what_has_not_run_has_its_evidence(doc: Path) -> None:
    unproven = unproven_claims(rel(doc), doc.read_text(), CLAIMS_WITH_EVIDENCE)
    assert unproven == [], (f"{rel(doc)} claims something has not run or was not verified; make it true or "
                            f"add it with its evidence to CLAIMS_WITH_EVIDENCE:\n" + "\n".join(unproven))


def test_the_evidence_list_names_only_claims_the_docs_still_make() -> None:
    texts = {rel(d): d.read_text() for d in DOCS}
    assert stale_evidence(texts, CLAIMS_WITH_EVIDENCE) == []


def test_readme_setup_times_and_counts_quote_e2e_readme() -> None:
    section, source = quick_start((REPO / "README.md").read_text()), (REPO / "e2e" / "README.md").read_text()
    assert _DURATION.search(section) and _PASSED.search(section), "README's Quick start lost its measured times"
    assert unquoted_figures(section, source, _DURATION) == []
    assert unquoted_figures(section, source, _PASSED) == []


def test_operator_memory_figures_quote_the_benchmarks() -> None:
    text, source = (REPO / "docs" / "operator.md").read_text(), (REPO / "docs" / "benchmarks.md").read_text()
    assert unquoted_figures(text, source, _MIB) == []


def test_readme_make_table_names_every_target() -> None:
    listed = make_table_targets((REPO / "README.md").read_text())
    assert phony_targets() - _UNLISTED_TARGETS - listed == set()
    assert listed - make_targets() == set()


def test_readme_layout_names_every_folder_and_example() -> None:
    readme = (REPO / "README.md").read_text()
    names = {n.rstrip("/") for n in layout_names(readme)}
    folders = {d for d in top_level_dirs() if not ignored(f"{d}/", REPO)}  # (not build/, dist/: made by runs)
    assert folders - names == set(), "README's layout table misses top-level folders"
    examples = {f.name for f in (REPO / "examples").iterdir() if f.is_file()}
    row = next(line for line in table(readme, "Layout").splitlines() if line.startswith("| `examples/` |"))
    assert {e for e in examples if f"`{e}`" not in row} == set(), "README's layout table misses examples/ files"


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_relative_links_resolve(doc: Path) -> None:
    assert broken_links(doc.read_text(), doc.parent) == []


@pytest.mark.parametrize("name", ["pyproject.toml", "Makefile", "Dockerfile"])
def test_paths_in_build_file_comments_exist(name: str) -> None:
    assert missing_comment_paths((REPO / name).read_text()) == []


# --- each check can fail -------------------------------------------------------------------------------

def test_the_checkers_report_issue_44s_stale_statements() -> None:
    stale_readme = ("| local cluster | working locally; the kind path is written but has not run yet (no Docker "
                    "here) |\n| security | e2e-tested on the local cluster (which admits but does not enforce the "
                    "security context) |")
    assert len(unproven_claims("README.md", stale_readme, CLAIMS_WITH_EVIDENCE)) == 2
    assert unproven_claims("docs/image.md", "Verified. Not verified:\n\n- a build", CLAIMS_WITH_EVIDENCE) == []
    assert stale_evidence({"docs/image.md": "Verified: everything."},
                          {("docs/image.md", "Not verified:"): "x"}) == [("docs/image.md", "Not verified:")]

    old_setup = "caches (2026-11-22): 35 minutes in all, 7.5 minutes for the e2e CI tier, 1,336 passed"
    source = "e2e CI tier (**88 passed, 2 skipped**), 43 min 23 s, 1,336 passed"
    assert unquoted_figures(old_setup, source, _DURATION) == ["35 minutes", "7.5 minutes"]
    assert unquoted_figures(old_setup, source, _PASSED) == []
    assert unquoted_figures("1,000 jobs in about 275 MiB", "peak RSS **269 MiB**", _MIB) == ["275 MiB"]

    readme = "## Make targets\n\n| `make demo` / `lint` | x |\n\n## Layout\n\n| `docs/` | y |\n"
    assert make_table_targets(readme) == {"demo", "lint"}
    assert layout_names(readme) == {"docs/"}

    doc = "See [the design](design.md#2-vocabulary), [nowhere](nowhere.md), [a bad anchor](design.md#no-such-heading),\n" \
          "[here](#links) and [there](#gone), [out](https://example.com/x#y).\n\n## Links\n"
    assert broken_links(doc, REPO / "docs") == ["nowhere.md", "design.md#no-such-heading", "#gone"]

    comment = 'x = 1  # explained in docs/development.md ("Type checking"), and docs/design.md\n'
    assert missing_comment_paths(comment) == ["docs/development.md"]
