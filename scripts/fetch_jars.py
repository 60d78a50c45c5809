#!/usr/bin/env python3
"""Fetch one pinned jar set of jars.lock from Maven Central into a cache dir and print that dir.

    python3 scripts/fetch_jars.py kafka              # ~/.cache/sparkpoint/kafka-4.1.1
    python3 scripts/fetch_jars.py spark-kafka --dest /opt/sparkpoint/jars   (the runtime image)

Standard library only (it runs in the image build too) and no Maven: jars.lock names every jar and
its sha256. A dir whose `.lock` marker holds the set's current lines is reused as it is, so only a
fresh machine (or a changed pin) downloads; otherwise every jar is checked, missing or wrong ones
are fetched, jars no longer in the set are removed (the dir is a classpath: `libs/*`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CENTRAL = "https://repo1.maven.org/maven2/"
MARKER = ".lock"


def read_lock(lock: Path, name: str) -> tuple[str, list[tuple[str, str]]]:
    """(versioned set name, [(sha256, path)]) of the one set named `name-<version>`."""
    sets: dict[str, list[tuple[str, str]]] = {}
    for line in lock.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            set_name, sha, path = line.split()
            sets.setdefault(set_name, []).append((sha, path))
    found = [s for s in sets if s.startswith(name + "-") and s[len(name) + 1:][:1].isdigit()]
    if len(found) != 1:
        raise SystemExit(f"fetch_jars: {lock} has {len(found)} sets named {name}-<version> (of {sorted(sets)})")
    return found[0], sets[found[0]]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, target: Path, expected: str) -> int:
    part = target.with_name(target.name + ".part")
    for attempt in range(3):
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, open(part, "wb") as out:
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
            break
        except OSError as exc:
            if attempt == 2:
                raise SystemExit(f"fetch_jars: {url}: {exc}") from None
            time.sleep(2 ** attempt)
    got = sha256(part)
    if got != expected:
        part.unlink()
        raise SystemExit(f"fetch_jars: {url}: sha256 {got}, jars.lock pins {expected}")
    part.rename(target)
    return target.stat().st_size


def ensure(name: str, dest: Path | None = None, lock: Path = ROOT / "jars.lock") -> Path:
    set_name, jars = read_lock(lock, name)
    if dest is None:
        cache = Path(os.environ.get("SPARKPOINT_CACHE") or Path.home() / ".cache" / "sparkpoint")
        dest = cache / set_name
    wanted = "".join(f"{sha} {path}\n" for sha, path in jars)
    marker = dest / MARKER
    if marker.exists() and marker.read_text() == wanted:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    started, fetched = time.monotonic(), 0
    names = set()
    for sha, path in jars:
        target = dest / Path(path).name
        names.add(target.name)
        if target.exists() and sha256(target) == sha:
            continue
        fetched += download(CENTRAL + path, target, sha)
    for stale in dest.glob("*.jar"):
        if stale.name not in names:
            stale.unlink()
    marker.write_text(wanted)
    if fetched:
        print(f"fetched {set_name}: {len(jars)} jars, {fetched / 2**20:.1f} MiB in "
              f"{time.monotonic() - started:.1f} s into {dest} (later runs reuse it)", file=sys.stderr)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the set's name without its version: kafka, spark-kafka")
    parser.add_argument("--dest", type=Path, help="put the jars here instead of the versioned cache dir")
    parser.add_argument("--lock", type=Path, default=ROOT / "jars.lock")
    args = parser.parse_args()
    print(ensure(args.name, args.dest, args.lock))


if __name__ == "__main__":
    main()
