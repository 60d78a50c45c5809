#!/usr/bin/env bash
# Fetches hadoop-aws (matching pyspark's Hadoop) and the jars it needs from Maven Central once per
# machine into a versioned cache dir; prints that dir (pass its jars to spark.jars).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
source "$here/versions.env"
cache=${SPARKPOINT_CACHE:-$HOME/.cache/sparkpoint}
dir="$cache/hadoop-aws-$HADOOP_AWS_VERSION-sdk-$AWS_SDK_BUNDLE_VERSION"
central=https://repo1.maven.org/maven2
fetch() {  # group-path artifact version
  local jar="$dir/$2-$3.jar"
  [ -s "$jar" ] && return 0
  echo "fetching $2 $3 from Maven Central (first run on this machine only)" >&2
  curl -fsSL --retry 3 -o "$jar.part" "$central/$1/$2/$3/$2-$3.jar"
  curl -fsSL --retry 3 "$central/$1/$2/$3/$2-$3.jar.sha1" | awk '{print $1 "  '"$jar.part"'"}' | sha1sum -c --quiet - >&2
  mv "$jar.part" "$jar"
}
mkdir -p "$dir"
fetch org/apache/hadoop hadoop-aws "$HADOOP_AWS_VERSION"
fetch software/amazon/awssdk bundle "$AWS_SDK_BUNDLE_VERSION"
fetch software/amazon/s3/analyticsaccelerator analyticsaccelerator-s3 "$S3_ANALYTICS_ACCELERATOR_VERSION"
echo "$dir"
