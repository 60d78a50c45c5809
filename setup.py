"""Packages: sparkpoint/ and, through its symlinks, runtime/, operator/ and plugin/ (see
sparkpoint/__init__.py). operator/ is a namespace package (no __init__.py), hence find_namespace_packages."""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages(include=["sparkpoint", "sparkpoint.*"], exclude=["*.__pycache__"]))
