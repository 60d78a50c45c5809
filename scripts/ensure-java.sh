#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer. Installs Debian's headless JDK when none is found.
set -euo pipefail
if command -v java >/dev/null 2>&1; then
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  if [ "${v:-0}" -ge 17 ]; then exit 0; fi
fi
echo "installing a Java 17 runtime for Spark" >&2
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -q >&2 && $SUDO apt-get install -y -q openjdk-17-jre-headless >&2
