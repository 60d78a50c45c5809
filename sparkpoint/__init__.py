"""Sparkpoint: durable, incremental checkpoints for PySpark streaming on Kubernetes.

The product's code lives in the checkout's top-level folders runtime/, operator/ and plugin/; this
package holds three committed symlinks to them (sparkpoint/runtime -> ../runtime, and so on), so
`sparkpoint.runtime`, `sparkpoint.operator` and `sparkpoint.plugin` are plain directories under
sparkpoint/ for Python, type checkers and editors alike, and a wheel ships them as real folders.
operator/ deliberately has no __init__.py: a regular package named `operator` at the top of a
checkout would shadow the standard library's `operator` module for any Python started there; as a
namespace package it never does.
"""

from importlib import metadata as _metadata


def version() -> str:
    """The installed distribution's version (pyproject.toml's, the one place it is written): what every
    command's --version prints. "unknown" when run from a checkout that was never installed."""
    try:
        return _metadata.version("sparkpoint")
    except _metadata.PackageNotFoundError:
        return "unknown"
