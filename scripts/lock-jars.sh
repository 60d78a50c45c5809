#!/usr/bin/env bash
# Rewrites jars.lock from the pins in versions.env: resolves each jar set with Maven once (on a
# throwaway pom) and records every jar's Maven Central path and sha256. Run it after changing a pin;
# scripts/fetch_jars.py then fetches exactly that list with no Maven.
#   kafka-<KAFKA_VERSION>              the broker kafka_2.13 and its runtime dependencies
#   spark-kafka-<SPARK_KAFKA_VERSION>  the connector jars only (pyspark ships the rest: lz4, zstd,
#                                      snappy, scala-parallel-collections, jsr305), so no transitives
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source versions.env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

dep() {  # group artifact version [nodeps]
  local excl=""
  [ "${4:-}" = nodeps ] && excl="<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
  echo "<dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version>$excl</dependency>"
}

resolve() {  # set-name dependency-xml...
  local name=$1; shift
  mkdir -p "$tmp/$name"
  cat > "$tmp/$name/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>lock</groupId><artifactId>$name</artifactId><version>0</version>
<dependencies>$*</dependencies></project>
EOF
  # Repository layout keeps group/artifact/version, which is the jar's path under Maven Central.
  (cd "$tmp/$name" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime \
     -Dmdep.useRepositoryLayout=true -DoutputDirectory=jars >&2)
  (cd "$tmp/$name/jars" && find . -name '*.jar' | sed 's|^\./||' | LC_ALL=C sort | while read -r path; do
     echo "$name $(sha256sum "$path" | cut -d' ' -f1) $path"
   done)
}

{
  echo "# Jars fetched from Maven Central by scripts/fetch_jars.py: <set> <sha256> <path under maven2/>."
  echo "# Written by scripts/lock-jars.sh from versions.env; do not edit by hand."
  resolve "kafka-$KAFKA_VERSION" "$(dep org.apache.kafka kafka_2.13 "$KAFKA_VERSION")"
  resolve "spark-kafka-$SPARK_KAFKA_VERSION" \
    "$(dep org.apache.spark spark-sql-kafka-0-10_2.13 "$SPARK_KAFKA_VERSION" nodeps)" \
    "$(dep org.apache.spark spark-token-provider-kafka-0-10_2.13 "$SPARK_KAFKA_TOKEN_PROVIDER_VERSION" nodeps)" \
    "$(dep org.apache.kafka kafka-clients "$SPARK_KAFKA_CLIENTS_VERSION" nodeps)" \
    "$(dep org.apache.commons commons-pool2 "$COMMONS_POOL2_VERSION" nodeps)"
} > "$tmp/jars.lock"
mv "$tmp/jars.lock" jars.lock
echo "jars.lock: $(grep -vc '^#' jars.lock) jars" >&2
