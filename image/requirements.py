"""Prints one image target's Python requirements, taken from pyproject.toml so the pins live in
one place: the base dependencies plus the target's extra (`sparkpoint[runtime]` or `[operator]`)."""

import sys
import tomllib

TARGETS = ("runtime", "operator")


def requirements(pyproject: dict, target: str) -> list[str]:
    if target not in TARGETS:
        raise SystemExit(f"unknown image target {target!r} (operator or runtime)")
    project = pyproject["project"]
    out: list[str] = []
    for dep in [*project["dependencies"], *project["optional-dependencies"][target]]:
        if dep not in out:
            out.append(dep)
    return out


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        print("\n".join(requirements(tomllib.load(f), sys.argv[2])))
