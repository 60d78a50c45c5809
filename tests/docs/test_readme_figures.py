"""README's status rows quote the measurements of docs/benchmarks.md, not figures of their own.

The benchmarks rewrite their marked sections of docs/benchmarks.md (bench/report.py): the operator
load table (bench/operator_bench.py, from its raw results) and the peer section (bench/peers/render.py,
from docs/img/peer-results.json). This test derives from those sections the phrases README's status
table must contain, so a new run that changes a figure or a verdict fails here until README says the
same. Pure: reads two files.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
README = REPO / "README.md"


def section(text: str, name: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    assert start in text and end in text, f"docs/benchmarks.md lost its {name} markers"
    return text[text.index(start):text.index(end)]


def status_table(readme: str) -> str:
    return readme.split("## Status", 1)[1].split("\n## ", 1)[0]


def operator_phrases(bench: str) -> list[str]:
    """From the operator-load table: p99 lag and peak RSS per scale, and the verdict at the largest."""
    part = section(bench, "operator-load")
    jobs, p99, peak = [], [], []
    for row in re.finditer(r"^\| (\d+) \|(.*)\|$", part, re.M):
        cells = [c.strip() for c in row.group(2).split("|")]
        lag = next(c for c in cells if re.fullmatch(r"[\d.]+ / [\d.]+ / [\d.]+ s", c))
        rss = next(c for c in cells if c.endswith(" MiB"))
        jobs.append(f"{int(row.group(1)):,}")
        p99.append(lag.split(" / ")[1])
        peak.append(rss.removesuffix(" MiB").split(" / ")[1])
    assert jobs, "no rows in the operator-load table"
    verdict = re.search(r"^At (\d+) jobs: trigger lag p99 .*?\(goal < ([\d.]+) s: (meets|misses) goal\), "
                        r"peak RSS .*?\(goal < (\d+) MiB: (meets|misses) goal\)", part, re.M)
    assert verdict, "no verdict line under the operator-load table"
    met = verdict.group(3) == verdict.group(5) == "meets"
    return [f"p99 trigger lag {' / '.join(p99)} s and peak RSS {' / '.join(peak)} MiB at {' / '.join(jobs)} jobs",
            f"goals at {int(verdict.group(1)):,} jobs (p99 < {verdict.group(2)} s, RSS < {verdict.group(4)} MiB) "
            + ("met" if met else "missed")]


_VERDICT = {"met": "met", "not met": "not met", "not resolved": "not resolved"}


def peer_goal_phrases(bench: str) -> list[str]:
    """From the peer section's Goals list (the full workload; the medium run's goals have their own heading)."""
    part = section(bench, "peer-bench")
    goals = part.split("\n### Goals\n", 1)[1].split("\n### ", 1)[0]
    phrases = []
    for m in re.finditer(r"^- (\S+/\S+ at \d+ ms): ([\d.]+) \[[\d., ]+\] over batches"
                         r"(?:, (\[[\d., ]+\]) resampling the (\d+) rounds)?.*?; goal (\S+ [\d.]+): \*\*(met|not met|not resolved)",
                         goals, re.M):
        rounds = f" {m.group(3)} over {m.group(4)} rounds" if m.group(3) else ""
        phrases.append(f"{m.group(1)}: {m.group(2)}{rounds} (goal {m.group(5)}, {_VERDICT[m.group(6)]}")
    assert phrases, "no goal lines in the peer section"
    return phrases


def restore_phrase(bench: str) -> str:
    part = section(bench, "peer-bench")
    m = re.search(r"= \*\*(\d+%) of raw GET\*\* (\[\d+%, \d+%\]) resampling the repeats \(goal (>= \d+%): \*\*(met|not met|not resolved)",
                  part)
    assert m, "no remote-restore-under-load figure in the peer section"
    return f"{m.group(1)} of raw GET {m.group(2)} (goal {m.group(3)}, {m.group(4)})"


def flink_phrases(bench: str) -> list[str]:
    """Checkpoint duration vs Flink's where both ran with the same state partitions (the others get no verdict)."""
    part = section(bench, "peer-bench")
    phrases = []
    for m in re.finditer(r"^- sparkpoint-10s vs Flink at (\S+), (\S+) churn, (\d+ ms), (\d+) partitions each: .*?"
                         r"total [\d.]+ vs [\d.]+ s \(([\d.]+x)\).*?; goal \(checkpoint duration no worse than "
                         r"Flink's\) (met|not met)\.$", part, re.M):
        size, churn, latency, partitions, ratio, verdict = m.groups()
        phrases.append(f"{size}, {churn} churn, {latency}, {partitions} partitions each: {ratio} ({verdict})")
    assert phrases, "no equal-partition Flink verdicts in the peer section"
    return phrases


def expected_phrases(bench: str) -> list[str]:
    return [*operator_phrases(bench), *peer_goal_phrases(bench), restore_phrase(bench), *flink_phrases(bench)]


def missing_phrases(readme: str, bench: str) -> list[str]:
    table = status_table(readme)
    return [p for p in expected_phrases(bench) if p not in table]


def test_readme_status_quotes_the_benchmarks() -> None:
    missing = missing_phrases(README.read_text(), BENCHMARKS.read_text())
    assert missing == [], "README's status table disagrees with docs/benchmarks.md; it should say:\n" + \
        "\n".join(missing)


def test_readme_status_links_the_benchmark_sections() -> None:
    table = status_table(README.read_text())
    for anchor in ("operator-under-load-benchoperator_benchpy-make-bench-operator",
                   "peers-sparkpoint-vs-vanilla-spark-on-s3-flink-and-the-floor-benchpeer_benchpy",
                   "goals", "remote-restore-under-cpu-load"):
        assert f"docs/benchmarks.md#{anchor}" in table
    headings = {slug(h) for h in re.findall(r"^#+ (.+)$", BENCHMARKS.read_text(), re.M)}
    for anchor in re.findall(r"docs/benchmarks\.md#([\w-]+)", table):
        assert anchor in headings, f"README links docs/benchmarks.md#{anchor}, which is no heading"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_a_changed_figure_is_reported() -> None:
    bench, readme = BENCHMARKS.read_text(), README.read_text()
    assert missing_phrases(readme, bench) == []
    # a rerun at 1,000 jobs with another p99 and a missed goal
    rerun = re.sub(r"(\| 1000 \|.*?\| [\d.]+ / )([\d.]+)( / [\d.]+ s \|)", r"\g<1>7.50\3", bench, count=1)
    rerun = rerun.replace("(goal < 2 s: meets goal)", "(goal < 2 s: misses goal)")
    missing = missing_phrases(readme, rerun)
    assert any("0.02 / 0.02 / 7.50 s" in p for p in missing)
    assert any(p.endswith("missed") for p in missing)
    # and an old README figure is not accepted
    stale = readme.replace("0.979 [0.940, 1.047]", "0.98")
    assert any("0.979" in p for p in missing_phrases(stale, bench))
