"""The job spec model's former path, kept for users' code that imports it: the model is
sparkpoint.runtime.spec (runtime/spec/), whose public names this re-exports. The product imports
sparkpoint.runtime.spec (pyproject.toml's import contracts forbid this path to the operator and plugin)."""

from sparkpoint.runtime.spec import *  # noqa: F403
from sparkpoint.runtime.spec import __all__  # noqa: F401
