"""`sparkpoint-operator` loads the StreamingJob handlers and, when that part is installed, the
StreamingJobSavepoint ones (operator/savepoint/); a broken import inside that part is not hidden."""

from __future__ import annotations

import importlib

import pytest

from sparkpoint.operator import __main__ as operator_main

SAVEPOINT_HANDLERS = "sparkpoint.operator.savepoint.handlers"


def _loads(monkeypatch, error: ImportError | None) -> list[str]:
    loaded: list[str] = []

    def import_module(name: str):
        loaded.append(name)
        if name == SAVEPOINT_HANDLERS and error is not None:
            raise error
        return None

    monkeypatch.setattr(importlib, "import_module", import_module)
    operator_main.load_handlers()
    return loaded


def test_both_parts_are_loaded(monkeypatch) -> None:
    assert _loads(monkeypatch, None) == ["sparkpoint.operator.handlers", SAVEPOINT_HANDLERS]


@pytest.mark.parametrize("missing", ["sparkpoint.operator.savepoint", SAVEPOINT_HANDLERS])
def test_the_savepoint_part_may_be_missing(monkeypatch, missing: str) -> None:
    _loads(monkeypatch, ModuleNotFoundError(f"No module named {missing!r}", name=missing))


def test_a_broken_import_inside_the_savepoint_part_is_raised(monkeypatch) -> None:
    with pytest.raises(ModuleNotFoundError):
        _loads(monkeypatch, ModuleNotFoundError("No module named 'yaml'", name="yaml"))
