"""Peer benchmarks (issue 10): vanilla Spark on s3a, Flink, Sparkpoint incremental/full and the floor,
side by side on the same MinIO; orchestrated by bench/peer_bench.py."""
