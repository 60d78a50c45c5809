"""Object-store requests by kind, read from MinIO's Prometheus endpoint (/minio/v2/metrics/cluster),
and what they would cost per month at public list prices."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

# S3 API name -> the kind a bill groups it under. MinIO's `api` label is the lower-cased name.
_KIND_OF_API = {
    "PutObject": "PUT", "CopyObject": "PUT", "NewMultipartUpload": "PUT", "PutObjectPart": "PUT",
    "CompleteMultipartUpload": "PUT", "AbortMultipartUpload": "PUT", "PutBucket": "PUT",
    "GetObject": "GET", "SelectObjectContent": "GET",
    "HeadObject": "HEAD", "HeadBucket": "HEAD",
    "ListObjectsV1": "LIST", "ListObjectsV2": "LIST", "ListObjectVersions": "LIST",
    "ListMultipartUploads": "LIST", "ListObjectParts": "LIST", "ListBuckets": "LIST",
    "DeleteObject": "DELETE", "DeleteMultipleObjects": "DELETE",
}
KIND_OF_API = {api.lower(): kind for api, kind in _KIND_OF_API.items()}
KINDS = ("PUT", "GET", "LIST", "HEAD", "DELETE", "OTHER")
REQUEST_METRIC = "minio_s3_requests_total"
_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# Amazon S3 Standard, us-east-1 list prices (https://aws.amazon.com/s3/pricing/, read 2026-11-22):
# PUT, COPY, POST, LIST: $0.005 per 1,000; GET, SELECT and all other requests: $0.0004 per 1,000;
# DELETE: free; storage $0.023 per GB-month (first 50 TB).
PRICE_PER_1000 = {"PUT": 0.005, "LIST": 0.005, "GET": 0.0004, "HEAD": 0.0004, "OTHER": 0.0004, "DELETE": 0.0}
STORAGE_PER_GB_MONTH = 0.023
PRICES_SOURCE = "Amazon S3 Standard us-east-1 list prices, aws.amazon.com/s3/pricing, read 2026-11-22"
HOURS_PER_MONTH = 730


def parse_requests(text: str) -> dict[str, int]:
    """Total requests per kind from a Prometheus text exposition; lines of other metrics are ignored."""
    out = dict.fromkeys(KINDS, 0)
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m or m.group("name") != REQUEST_METRIC:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        kind = KIND_OF_API.get(labels.get("api", "").lower(), "OTHER")
        out[kind] += int(float(m.group("value")))
    return out


RECEIVED_METRIC = "minio_s3_traffic_received_bytes"


def parse_received_bytes(text: str) -> int:
    """Bytes MinIO received in S3 requests (the uploads), summed over servers."""
    total = 0.0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(RECEIVED_METRIC + " ") or line.startswith(RECEIVED_METRIC + "{"):
            total += float(line.rsplit(None, 1)[1])
    return int(total)


def delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Requests made between two scrapes (counters only grow; a reset reads as the new value)."""
    return {k: (after.get(k, 0) - before.get(k, 0)) if after.get(k, 0) >= before.get(k, 0) else after.get(k, 0)
            for k in KINDS}


def at(samples: list[tuple[float, Mapping[str, float]]], t: float, kinds: Sequence[str] = KINDS) -> dict[str, float]:
    """Counters at wall time t, linearly interpolated between the scrapes around it (sorted by time)."""
    if not samples:
        raise ValueError("no scrapes")
    before = [s for s in samples if s[0] <= t]
    after = [s for s in samples if s[0] >= t]
    if not before or not after:
        raise ValueError(f"time {t:.1f} is outside the scrapes ({samples[0][0]:.1f}-{samples[-1][0]:.1f})")
    (t0, a), (t1, b) = before[-1], after[0]
    f = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
    return {k: a.get(k, 0) + f * (b.get(k, 0) - a.get(k, 0)) for k in kinds}


def in_window(samples: list[tuple[float, Mapping[str, int]]], start: float, end: float) -> dict[str, int]:
    """Requests made between two wall times: the steady state of a run, without its JVM start and the
    final checkpoint of its drain (which a short run's whole-run count spreads over its span)."""
    a, b = at(samples, start), at(samples, end)
    return {k: max(0, round(b[k] - a[k])) for k in KINDS}


def per_hour(counts: Mapping[str, int], seconds: float) -> dict[str, float]:
    if seconds <= 0:
        raise ValueError("the measured interval must be positive")
    return {k: v * 3600 / seconds for k, v in counts.items()}


def monthly_cost(requests_per_hour: Mapping[str, float], stored_bytes: float = 0.0) -> float:
    """US dollars per month for one job at these request rates and this much stored data."""
    req = sum(PRICE_PER_1000.get(k, PRICE_PER_1000["OTHER"]) * v / 1000 for k, v in requests_per_hour.items())
    return req * HOURS_PER_MONTH + stored_bytes / 1e9 * STORAGE_PER_GB_MONTH


# The first path component, below a run's prefix, that names what wrote an object: Sparkpoint's store
# layout (docs/design.md section 3) and a vanilla checkpointLocation's directories.
AREAS = ("objects", "checkpoints", "pending", "savepoints", "outputs", "attempts", "fence.json",
         "offsets", "commits", "state", "sources", "metadata")


def area_of(key: str) -> str:
    """What part of a job's data an object belongs to (the outputs/ area includes the sink's staging)."""
    for part in key.split("/"):
        if part in AREAS:
            return part
    return "other"


def objects_by_area(keys: list[str]) -> dict[str, int]:
    return dict(sorted(Counter(area_of(key) for key in keys).items()))
