"""Checkpoint store benchmark on a real MinIO server (issue #2).

A tree of SST-like files (2-6 MiB, random bytes) is checkpointed once in full, then each round
replaces 5% of its bytes the way RocksDB compaction does (old SSTs deleted, new ones written) and
takes an incremental checkpoint. Reported, side by side in one run:
  * uploaded bytes / changed bytes per incremental checkpoint (goal <= 1.05) and its wall time;
  * restore throughput (parallel download + digest check: crc32, format 3) as a ratio of the raw `minio`
    client's download throughput of the same objects with the same parallelism (goal >= 0.7).

    python bench/store_bench.py                  # 1 GiB, writes its section of docs/benchmarks.md
    python bench/store_bench.py --size 128MiB --no-write
    python bench/store_bench.py --small          # what `make bench --small` runs (64 MiB)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import report  # bench/report.py; bench/ is on sys.path when this runs as a script

from harness.minio_server import MinioServer
from sparkpoint.runtime.checkpoint import CheckpointWriter, HashCache, restore, write_fence
from sparkpoint.runtime.store import JobRef
from sparkpoint.runtime.store.layout import object_key

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
START, END = "<!-- store-bench:start -->", "<!-- store-bench:end -->"
MiB = 1024 * 1024
BUCKET = "bench"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: use e.g. 64MiB or 1GiB")
    return int(float(m.group(1)) * {"B": 1, "KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}[m.group(2) or "B"])


class SstTree:
    """A directory of SST-like files that churns like RocksDB compaction."""

    def __init__(self, root: Path, total: int, seed: int = 7):
        self.root, self.rng, self.next_id = root, random.Random(seed), 1
        (root / "state" / "0" / "0" / "SSTs").mkdir(parents=True)
        while self.bytes() < total:
            self.add(min(self.rng.randint(2 * MiB, 6 * MiB), max(total - self.bytes(), 64 * 1024)))

    def files(self) -> list[Path]:
        return sorted((self.root / "state" / "0" / "0" / "SSTs").iterdir())

    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files()) if self.root.exists() else 0

    def add(self, size: int) -> int:
        path = self.root / "state" / "0" / "0" / "SSTs" / f"{self.next_id:06d}-{self.rng.getrandbits(32):08x}.sst"
        self.next_id += 1
        path.write_bytes(os.urandom(size))
        return size

    def churn(self, fraction: float) -> int:
        """Delete ~fraction of the bytes (oldest-first mix) and write as many new bytes."""
        target, removed = int(self.bytes() * fraction), 0
        files = self.files()
        self.rng.shuffle(files)
        for path in files:
            if removed >= target:
                break
            removed += path.stat().st_size
            path.unlink()
        written = 0
        while written < removed:
            written += self.add(min(self.rng.randint(2 * MiB, 6 * MiB), removed - written))
        return written


def raw_download(server: MinioServer, keys: list[str], target: Path, workers: int) -> float:
    """Seconds for the plain minio client to download `keys` (streamed to files, no checks)."""
    store = server.open(BUCKET, "bench")
    client, bucket, prefix = store.client, store.bucket, store.prefix  # type: ignore[attr-defined]
    target.mkdir(parents=True)

    def get(key: str) -> None:
        resp = client.get_object(bucket, f"{prefix}/{key}")
        try:
            with open(target / key.rsplit("/", 1)[-1], "wb") as f:
                for chunk in resp.stream(MiB):
                    f.write(chunk)
        finally:
            resp.close()
            resp.release_conn()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(get, keys))
    return time.perf_counter() - t0


def unverified_download(store, keys: list[str], target: Path, workers: int) -> float:  # type: ignore[no-untyped-def]
    """Diagnostic: our download path with sha256 verification switched off."""
    target.mkdir(parents=True)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda k: store.get_file(k, str(target / k.rsplit("/", 1)[-1])), keys))
    return time.perf_counter() - t0


def run(size: int, churn: float, rounds: int, workers: int, reps: int) -> dict:
    load_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="sparkpoint-store-bench-"))
    try:
        with MinioServer(data_dir=str(work / "minio")) as server:
            server.make_bucket(BUCKET)
            store, job = server.open(BUCKET, "bench"), JobRef("bench", "sst")
            t0 = time.perf_counter()
            tree = SstTree(work / "hot", size)
            gen_s = time.perf_counter() - t0
            writer = CheckpointWriter(store, job, attempt=write_fence(store, job), job_uid="bench",
                                      hash_cache=HashCache(None), upload_workers=workers)
            full = writer.take_checkpoint(tree.root, batch_id=0)
            incrementals = []
            for r in range(1, rounds + 1):
                changed = tree.churn(churn)
                res = writer.take_checkpoint(tree.root, batch_id=r)
                incrementals.append({"round": r, "changed_bytes": changed, "uploaded_bytes": res.new_bytes,
                                     "ratio": round(res.new_bytes / changed, 4), "wall_s": res.total_seconds,
                                     "hash_s": res.hash_seconds, "upload_s": res.upload_seconds,
                                     "files": res.files, "bytes": res.bytes})
            latest = res.manifest
            keys = sorted({object_key(job, f.sha256) for f in latest.files})
            timings: dict[str, list[float]] = {"raw": [], "ours": [], "unverified": []}
            cpu: dict[str, list[float]] = {"raw": [], "ours": [], "unverified": []}
            variants = {
                "raw": lambda d: raw_download(server, keys, d, workers),
                "ours": lambda d: restore(store, job, d, workers=workers).seconds,
                "unverified": lambda d: unverified_download(store, keys, d, workers),
            }
            order = list(variants)
            for rep in range(reps):  # rotate the order so no variant always runs first or last
                for name in order[rep % 3:] + order[:rep % 3]:
                    os.sync()  # flush the previous variant's dirty pages outside the timed window
                    c0 = time.process_time()
                    timings[name].append(variants[name](work / f"{name}-{rep}"))
                    cpu[name].append(time.process_time() - c0)
                    shutil.rmtree(work / f"{name}-{rep}")
            raw_s, ours_s, unverified_s = timings["raw"], timings["ours"], timings["unverified"]
            raw_cpu, ours_cpu = cpu["raw"], cpu["ours"]
            total = latest.totals.bytes
            raw_mbs = [total / MiB / s for s in raw_s]
            ours_mbs = [total / MiB / s for s in ours_s]
            gib = total / (1024 * MiB)
            return {
                "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
                "load_average_1m": [round(load_start, 1), round(os.getloadavg()[0], 1)],
                "size_bytes": size, "files": full.files, "churn": churn, "workers": workers,
                "generate_s": round(gen_s, 2),
                "full": {"bytes": full.bytes, "wall_s": full.total_seconds, "hash_s": full.hash_seconds,
                         "upload_s": full.upload_seconds},
                "incremental": incrementals,
                "ratio_max": max(i["ratio"] for i in incrementals),
                "wall_mean_s": round(statistics.mean(i["wall_s"] for i in incrementals), 3),
                "restore": {"bytes": total, "ours_mib_s": [round(x, 1) for x in ours_mbs],
                            "raw_mib_s": [round(x, 1) for x in raw_mbs],
                            "unverified_mib_s": [round(total / MiB / s, 1) for s in unverified_s],
                            "raw_client_cpu_s_per_gib": round(statistics.median(raw_cpu) / gib, 2),
                            "ours_client_cpu_s_per_gib": round(statistics.median(ours_cpu) / gib, 2),
                            "ratio_of_medians": round(statistics.median(ours_mbs) / statistics.median(raw_mbs), 3)},
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render(r: dict) -> str:
    gib = r["size_bytes"] / (1024 * MiB)
    ok = lambda good: "meets goal" if good else "**misses goal**"  # noqa: E731
    lines = [START, "## Checkpoint store (MinIO)", "",
             f"`python bench/store_bench.py` on {r['when']}, {r['machine']}, one local MinIO server on the same "
             f"machine, which other jobs shared (1-minute load average {r['load_average_1m'][0]} at the start, "
             f"{r['load_average_1m'][1]} at the end: absolute throughputs are noisy, compare within the run). Tree: {gib:.2f} GiB in {r['files']} SST-like "
             f"files of 2-6 MiB; each round deletes {r['churn']:.0%} of the bytes and writes as many new "
             f"bytes (compaction-style); {r['workers']} parallel transfers.", "",
             f"Full first checkpoint: {r['full']['bytes'] / MiB:.0f} MiB in {r['full']['wall_s']:.1f} s "
             f"(hash {r['full']['hash_s']:.1f} s, upload {r['full']['upload_s']:.1f} s).", "",
             "| round | changed | uploaded | uploaded / changed | wall time | hash | upload |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i in r["incremental"]:
        lines.append(f"| {i['round']} | {i['changed_bytes'] / MiB:.1f} MiB | {i['uploaded_bytes'] / MiB:.1f} MiB | "
                     f"{i['ratio']:.3f} | {i['wall_s']:.2f} s | {i['hash_s']:.2f} s | {i['upload_s']:.2f} s |")
    rs = r["restore"]
    lines += ["", f"- Bytes uploaded per checkpoint / bytes changed: max **{r['ratio_max']:.3f}** "
              f"(goal <= 1.05: {ok(r['ratio_max'] <= 1.05)}); mean incremental wall time {r['wall_mean_s']:.2f} s.",
              f"- Restore of {rs['bytes'] / MiB:.0f} MiB with size + sha256 verification: "
              f"{', '.join(map(str, rs['ours_mib_s']))} MiB/s; raw `minio` client download of the same objects, "
              f"same parallelism, in the same run (order rotated per repetition): {', '.join(map(str, rs['raw_mib_s']))} MiB/s. "
              f"Ratio of medians **{rs['ratio_of_medians']:.2f}** (goal >= 0.7: {ok(rs['ratio_of_medians'] >= 0.7)}).",
              f"- Cost of verification: the same download path with verification switched off ran at "
              f"{', '.join(map(str, rs['unverified_mib_s']))} MiB/s; client CPU per GiB was "
              f"{rs['ours_client_cpu_s_per_gib']:.2f} s for the verified restore vs {rs['raw_client_cpu_s_per_gib']:.2f} s "
              f"for the raw download. The spread between repetitions of one variant is as large as the gap "
              f"between variants: two cores are shared by the client, the MinIO server and anything else running.",
              "", plot_incremental(r), "", plot_restore(rs), "", END]
    return "\n".join(lines)


def plot_incremental(r: dict) -> str:
    rounds = [i["round"] for i in r["incremental"]]

    def draw(ax) -> None:  # type: ignore[no-untyped-def]
        width = 0.38
        ax.bar([x - width / 2 for x in rounds], [i["changed_bytes"] / MiB for i in r["incremental"]], width,
               label="changed")
        ax.bar([x + width / 2 for x in rounds], [i["uploaded_bytes"] / MiB for i in r["incremental"]], width,
               label="uploaded")
        ax.set_xlabel("checkpoint round")
        ax.set_ylabel("MiB")
        ax.set_xticks(rounds)
        ax.legend(loc="lower right")
    return report.plot("store-incremental", "Bytes uploaded vs bytes changed per checkpoint", draw)


def plot_restore(rs: dict) -> str:
    reps = list(range(1, len(rs["ours_mib_s"]) + 1))

    def draw(ax) -> None:  # type: ignore[no-untyped-def]
        width = 0.27
        for offset, key, label in ((-width, "ours_mib_s", "verified restore"),
                                   (0.0, "unverified_mib_s", "restore, verification off"),
                                   (width, "raw_mib_s", "raw minio client")):
            ax.bar([x + offset for x in reps], rs[key], width, label=label)
        ax.set_xlabel("repetition (same run, order rotated)")
        ax.set_ylabel("MiB/s")
        ax.set_xticks(reps)
        ax.legend(fontsize=8)
    return report.plot("store-restore", "Restore throughput vs raw download", draw)


def write_section(section: str) -> None:
    report.write_section(START, END, section)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=parse_size, default=parse_size("1GiB"), help="tree size (default 1GiB)")
    p.add_argument("--small", action="store_true", help="64 MiB quick pass")
    p.add_argument("--churn", type=float, default=0.05)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--reps", type=int, default=5, help="repetitions of each download variant")
    p.add_argument("--no-write", action="store_true", help="print, do not update docs/benchmarks.md")
    p.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = p.parse_args(argv)
    size = parse_size("64MiB") if args.small else args.size
    result = run(size, args.churn, args.rounds, args.workers, args.reps)
    section = render(result)
    print(json.dumps(result, indent=1) if args.json else section)
    if not args.no_write and not args.small:
        write_section(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
