"""Load the user's `module:function` and check that it returns a streaming DataFrame.

The function is called as `function(spark, **args)` with the spec's `job.args`.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from typing import Any


class EntrypointError(Exception):
    """The job's entrypoint cannot be loaded or does not build a streaming DataFrame."""


def load_entrypoint(entrypoint: str, python_path: list[str] | None = None) -> Callable[..., Any]:
    module_name, _, func_name = entrypoint.partition(":")
    if not module_name or not func_name:
        raise EntrypointError(f"entrypoint {entrypoint!r} is not of the form module:function")
    for entry in reversed(python_path or []):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise EntrypointError(f"entrypoint {entrypoint!r}: module {exc.name!r} not found "
                              f"(sys.path has {len(sys.path)} entries; set job.pythonPath)") from None
    except Exception as exc:  # a user module that fails on import
        raise EntrypointError(f"entrypoint {entrypoint!r}: importing {module_name} failed: "
                              f"{type(exc).__name__}: {exc}") from exc
    func = getattr(module, func_name, None)
    if func is None:
        raise EntrypointError(f"entrypoint {entrypoint!r}: module {module_name} has no attribute {func_name!r}")
    if not callable(func):
        raise EntrypointError(f"entrypoint {entrypoint!r}: {func_name} is not callable")
    return func


def build_stream(func: Callable[..., Any], spark: Any, args: dict[str, Any], entrypoint: str) -> Any:
    """Call the user function and insist on a streaming DataFrame."""
    from pyspark.sql import DataFrame

    try:
        inspect.signature(func).bind(spark, **args)
    except TypeError as exc:
        raise EntrypointError(f"entrypoint {entrypoint!r} cannot be called with spark and args "
                              f"{sorted(args)}: {exc}") from None
    result = func(spark, **args)
    if not isinstance(result, DataFrame):
        raise EntrypointError(f"entrypoint {entrypoint!r} returned {type(result).__name__}, "
                              "expected a streaming DataFrame")
    if not result.isStreaming:
        raise EntrypointError(f"entrypoint {entrypoint!r} returned a batch DataFrame, expected a "
                              "streaming one (built with spark.readStream)")
    return result
