#!/usr/bin/env bash
# Builds the lazy state file system's jar (jvm/src, docs/design.md §4) against pyspark's own jars, into
# ${SPARKPOINT_CACHE:-~/.cache/sparkpoint}/state-fs-<spark version>-<hash of the sources>/, and prints
# its path. Only a fresh machine or changed sources pay the compile (~5 s). PYTHON: the venv's python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
version=$("$python" -c 'import pyspark; print(pyspark.__version__)')
sources=$(cd "$here" && find src -name '*.java' | LC_ALL=C sort)
hash=$(cd "$here" && { sha256sum $sources; echo "$version"; } | sha256sum | cut -c1-16)
dir=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}/state-fs-$version-$hash
jar=$dir/sparkpoint-state-fs.jar
if [ ! -f "$jar" ]; then
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && javac -nowarn --release 17 -cp "$jars/*" -d "$tmp/classes" $sources)
  mkdir -p "$tmp/out" && jar cf "$tmp/out/sparkpoint-state-fs.jar" -C "$tmp/classes" .
  # a concurrent build of the same sources made the same jar: keep whichever landed first
  mv -T "$tmp/out" "$dir" 2>/dev/null || true
fi
echo "$jar"
