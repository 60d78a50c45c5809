"""Maps the top-level folders onto the `sparkpoint.*` import names (see pyproject.toml)."""

from setuptools import find_packages, setup

FOLDERS = {"sparkpoint.runtime": "runtime", "sparkpoint.operator": "operator", "sparkpoint.plugin": "plugin"}


def _packages() -> list[str]:
    names = ["sparkpoint"] + [f"sparkpoint.{sub}" for sub in find_packages("sparkpoint")]
    for prefix, folder in FOLDERS.items():
        names += [prefix] + [f"{prefix}.{sub}" for sub in find_packages(folder)]
    return names


setup(packages=_packages(), package_dir={"sparkpoint": "sparkpoint", **FOLDERS})
