"""Prints one image target's Python requirements, taken from pyproject.toml so the pins live in
one place: `runtime` gets every dependency, `operator` all but pyspark (it never starts Spark)."""

import sys
import tomllib

OPERATOR_EXCLUDES = {"pyspark"}


def requirements(pyproject: dict, target: str) -> list[str]:
    deps = pyproject["project"]["dependencies"]
    if target == "runtime":
        return list(deps)
    if target == "operator":
        return [d for d in deps if _name(d) not in OPERATOR_EXCLUDES]
    raise SystemExit(f"unknown image target {target!r} (operator or runtime)")


def _name(requirement: str) -> str:
    for i, char in enumerate(requirement):
        if not (char.isalnum() or char in "-_."):
            return requirement[:i].lower()
    return requirement.lower()


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        print("\n".join(requirements(tomllib.load(f), sys.argv[2])))
