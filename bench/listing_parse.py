"""ListObjectsV2 parsing: the minio client's parser vs runtime/store/s3_listing.py on the same pages.

CPU only (no server): pages shaped like MinIO's answers (Key, LastModified, ETag, Size, Owner,
StorageClass per entry; url-encoded keys), 1,000 keys each, as a large job's objects/ listing reads
them. Prints per-key microseconds, best of --rounds (the machine may be shared).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from types import SimpleNamespace

from minio.datatypes import parse_list_objects

from sparkpoint.runtime.store.s3_listing import PAGE_KEYS, parse_page

_ENTRY = ("<Contents><Key>{key}</Key><LastModified>2026-11-23T08:14:00.123Z</LastModified>"
          "<ETag>&quot;{etag}&quot;</ETag><Size>{size}</Size><Owner><ID>02d6176db174dc93cb1b899f7c6078f08"
          "654445fe8cf1b6ce98d8855f66bdbf4</ID><DisplayName>minio</DisplayName></Owner>"
          "<StorageClass>STANDARD</StorageClass></Contents>")


def page(start: int, count: int, last: bool) -> bytes:
    entries = "".join(_ENTRY.format(key=f"jobs/ns/job/objects/{hashlib.sha256(str(i).encode()).hexdigest()}",
                                    etag=hashlib.md5(str(i).encode()).hexdigest(), size=20480 + i)
                      for i in range(start, start + count))
    more = "" if last else "<NextContinuationToken>token</NextContinuationToken>"
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/'
            f'2006-03-01/"><Name>bkt</Name><Prefix>jobs/ns/job/objects/</Prefix><KeyCount>{count}</KeyCount>'
            f'<MaxKeys>{PAGE_KEYS}</MaxKeys><EncodingType>url</EncodingType>'
            f'<IsTruncated>{"false" if last else "true"}</IsTruncated>{more}{entries}'
            '</ListBucketResult>').encode()


def best(parse, pages: list[bytes], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        for body in pages:
            parse(body)
        times.append(time.process_time() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    n_pages = max(1, args.keys // PAGE_KEYS)
    pages = [page(i * PAGE_KEYS, PAGE_KEYS, i == n_pages - 1) for i in range(n_pages)]
    keys = n_pages * PAGE_KEYS
    assert sum(len(parse_page(b)[0]) for b in pages) == keys
    client = best(lambda b: parse_list_objects(SimpleNamespace(data=b), "bkt"), pages, args.rounds)
    ours = best(parse_page, pages, args.rounds)
    print(f"{keys} keys, CPU best of {args.rounds}: minio parse_list_objects {client * 1e3:.0f} ms "
          f"({client / keys * 1e6:.1f} us/key); s3_listing.parse_page {ours * 1e3:.0f} ms "
          f"({ours / keys * 1e6:.1f} us/key); {client / ours:.1f}x")


if __name__ == "__main__":
    main()
