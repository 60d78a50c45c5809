#!/usr/bin/env bash
# Re-resolves image/constraints.txt (the pinned package set of both images) from pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
{ $py image/requirements.py pyproject.toml runtime; $py image/requirements.py pyproject.toml operator; } \
  | sort -u > "$tmp/req.txt"
$py -m pip install -q --dry-run --ignore-installed --report "$tmp/report.json" -r "$tmp/req.txt"
{
  sed -n '1,2p' image/constraints.txt
  $py -c 'import json, sys
for i in sorted(json.load(open(sys.argv[1]))["install"], key=lambda i: i["metadata"]["name"].lower()):
    print(i["metadata"]["name"].lower() + "==" + i["metadata"]["version"])' "$tmp/report.json"
} > "$tmp/constraints.txt"
mv "$tmp/constraints.txt" image/constraints.txt
