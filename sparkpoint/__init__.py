"""Sparkpoint: durable, incremental checkpoints for PySpark streaming on Kubernetes.

`sparkpoint.runtime` is the top-level folder runtime/ and `sparkpoint.operator` is operator/.
operator/ deliberately has no __init__.py: a regular package named `operator` at the top of a
checkout would shadow the standard library's `operator` module for any Python started there.
As a namespace package it never does, and in a source checkout (editable install) this package
finds it through the checkout root added to __path__ below; a wheel ships it inside sparkpoint/.
"""

from pathlib import Path as _Path

_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "operator").is_dir() and (_checkout / "setup.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821  (__path__ exists in a package's namespace)
