"""`python tests/docs/collect_marks.py OUT.json PYTEST-ARGS...`: one `pytest --collect-only` that
writes which tests pytest's own `-m` selected and every collected test's markers (those conftest.py
adds from fixtures included), so tests/docs/test_markers.py checks the tiers with one collection of
the suite instead of one per marker expression (each costs seconds of imports)."""

from __future__ import annotations

import json
import sys

import pytest


class Record:
    def __init__(self) -> None:
        self.deselected: list[pytest.Item] = []
        self.found: dict[str, object] = {}

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.extend(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        everything = [*session.items, *self.deselected]
        self.found = {"selected": [i.nodeid for i in session.items],
                      "marks": {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in everything}}


if __name__ == "__main__":
    record = Record()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[2:]], plugins=[record])
    with open(sys.argv[1], "w") as out:
        json.dump(record.found, out)
    sys.exit(code)
