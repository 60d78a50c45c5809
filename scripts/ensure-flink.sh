#!/usr/bin/env bash
# PyFlink in its own venv (its dependency pins conflict with pyspark 4's) plus Flink's S3 filesystem
# plugin from Maven Central, once per machine, in a versioned cache dir. Prints that dir:
#   <dir>/venv/bin/python   runs PyFlink;   <dir>/plugins   is FLINK_PLUGINS_DIR (s3-fs-hadoop inside).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
source "$here/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
python=${PYTHON:-python3.11}
dir="$cache/flink-$FLINK_VERSION"
if [ ! -f "$dir/venv/.installed" ]; then
  echo "installing apache-flink $FLINK_VERSION into $dir/venv (first run on this machine only)" >&2
  rm -rf "$dir/venv"
  "$python" -m venv "$dir/venv"
  "$dir/venv/bin/python" -m pip install -q --upgrade pip >&2
  "$dir/venv/bin/python" -m pip install -q "apache-flink==$FLINK_VERSION" >&2
  touch "$dir/venv/.installed"
fi
plugin="$dir/plugins/s3-fs-hadoop/flink-s3-fs-hadoop-$FLINK_VERSION.jar"
if [ ! -s "$plugin" ]; then
  mkdir -p "$(dirname "$plugin")"
  url="https://repo1.maven.org/maven2/org/apache/flink/flink-s3-fs-hadoop/$FLINK_VERSION/flink-s3-fs-hadoop-$FLINK_VERSION.jar"
  curl -fsSL --retry 3 -o "$plugin.part" "$url"
  curl -fsSL --retry 3 "$url.sha1" | awk '{print $1 "  '"$plugin.part"'"}' | sha1sum -c --quiet - >&2
  mv "$plugin.part" "$plugin"
fi
# PyFlink's local MiniCluster loads no plugins: the S3 filesystem must be on its classpath (pyflink/lib).
lib=$("$dir/venv/bin/python" -c 'import os, pyflink; print(os.path.join(os.path.dirname(pyflink.__file__), "lib"))')
ln -sf "$plugin" "$lib/"
echo "$dir"
