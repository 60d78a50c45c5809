"""The figures beyond the alternating batch-duration rounds: recovery after a kill, key churn (uploaded
vs changed bytes per checkpoint at each state size, Flink too with plan.flink) and bucket bytes over
time with retention and GC.
Each phase records its failures in `skipped` and goes on, so one broken setup loses only its own rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import flink, recovery, replay, retention, sparkpoint_setup, vanilla
from .churn import ChurnWorkload
from .common import Context, Workload

PHASES = ("recovery", "churn", "retention", "replay")
RECOVERY_SETUPS = ("sparkpoint", "vanilla-changelog", "flink")
RETENTION_SETUPS = ("sparkpoint-10s", "vanilla-changelog")
CHURN_SETUPS = ("sparkpoint-10s", "vanilla-changelog", "flink")
# The runtime settings the churn phase can A/B: setup sparkpoint-10s-<knob><value> runs with <env>=<value>.
AB_KNOBS = {"nice": "SPARKPOINT_CHECKPOINT_NICE", "inline": "SPARKPOINT_CHECKPOINT_INLINE_MAX"}


@dataclass(frozen=True)
class ExtrasPlan:
    phases: tuple[str, ...]
    sizes: tuple[str, ...]  # churn.SIZES names
    churns: tuple[float, ...]
    retention_seconds: float
    sample_seconds: float
    small: bool
    gc_interval: str = "60s"  # the sidecar's defaults (spec.gc), as the runtime uses them
    grace: str = "1m"  # spec.gc.grace's default
    grace_seconds: float = 60.0
    retention_size: str = "tiny"
    steady_batches: int = 30
    flink: bool = True  # also kill and restore Flink (when scripts/ensure-flink.sh has installed it)
    recovery_setups: tuple[str, ...] = RECOVERY_SETUPS
    retention_setups: tuple[str, ...] = RETENTION_SETUPS
    replay_intervals: tuple[int, ...] = (5, 50)  # minDeltasForSnapshot values the replay phase compares
    replay_rounds: int = 2
    churn_setups: tuple[str, ...] = CHURN_SETUPS
    # Sparkpoint's checkpoint nice values to compare (SPARKPOINT_CHECKPOINT_NICE), one run each per
    # round, alternating; empty: one run at the runtime's default.
    churn_nice: tuple[int, ...] = ()
    # Or the largest file carried in the manifest (SPARKPOINT_CHECKPOINT_INLINE_MAX), the same way.
    churn_inline: tuple[int, ...] = ()
    churn_rounds: int = 1
    churn_partitions: int = 2  # state partitions of every churn setup (churn.ChurnWorkload.partitions)


def _attempt(skipped: dict[str, str], key: str, fn: Callable[[], Any], after: Callable[[], None]) -> Any:
    print(f"== {key}", flush=True)
    try:
        out = fn()
    except Exception as exc:  # one broken figure must not lose the others
        skipped[key] = f"{type(exc).__name__}: {exc}"[:300]
        print(f"   FAILED: {skipped[key]}", flush=True)
        return None
    finally:
        after()
    print(f"   {_brief(out)}", flush=True)
    return out


def _brief(out: Any) -> str:
    if isinstance(out, dict):
        return str({k: v for k, v in out.items() if k not in ("samples", "checkpoints", "command")})[:600]
    return str(out)[:600]


def run(plan: ExtrasPlan, w: Workload, ctx_at: Callable[[int], Context], latencies: list[int], jar_list: str,
        skipped: dict[str, str], out: dict[str, Any],
        after_each: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Fills `out` as it goes (an interrupted run keeps what finished). `after_each` runs after every
    figure's run (peer_bench empties the bucket: a run's data is measured by then, and 1 GB churn
    runs would otherwise fill the disk MinIO lives on)."""

    def attempt(key: str, fn: Callable[[], Any]) -> Any:
        return _attempt(skipped, key, fn, after_each)

    out.update({"recovery": [], "churn": [], "retention": [], "replay": [], "plan": dict(plan.__dict__)})
    if "recovery" in plan.phases:
        job = recovery.windowed_job(w.rows_per_batch, w.keys, w.payload_bytes, plan.small)
        out["recovery_job"] = {"rows_per_batch": job.rows_per_batch, "keys": job.keys,
                               "batches": job.total_batches, "trigger": job.trigger,
                               "checkpoint_interval": job.checkpoint_interval}
        for lat in latencies:
            ctx = ctx_at(lat)
            for name, fn in (("sparkpoint", lambda ctx=ctx, lat=lat: recovery.sparkpoint(
                                 ctx, job, f"recovery-sp-{lat}ms")),
                             ("vanilla-changelog", lambda ctx=ctx, lat=lat: recovery.vanilla(
                                 ctx, job, f"recovery-vanilla-{lat}ms", jar_list, ["--changelog"]))):
                if name not in plan.recovery_setups:
                    continue
                r = attempt(f"recovery {name} {lat} ms", fn)
                if r:
                    out["recovery"].append(r)
            d = flink.flink_dir()
            if d is not None and plan.flink and "flink" in plan.recovery_setups:
                args = ["--rows", str(job.rows_per_batch), "--keys", str(job.keys), "--batches", str(job.total_batches),
                        "--payload-bytes", str(w.payload_bytes), "--interval", job.checkpoint_interval,
                        "--parallelism", "1"]
                r = attempt(f"recovery flink {lat} ms", lambda ctx=ctx, lat=lat, args=args, d=d: recovery.flink(
                    ctx, str(d / "venv" / "bin" / "python"), str(d / "plugins"), args, f"recovery-flink-{lat}ms"))
                if r:
                    out["recovery"].append(r)
    if "churn" in plan.phases:
        for rnd in range(plan.churn_rounds):  # rounds alternate the setups (A B A B), latencies within
            for lat in latencies:
                _churn(plan, ctx_at(lat), lat, rnd, jar_list, attempt, out)
    if "retention" in plan.phases:
        ctx = ctx_at(0)
        rw = ChurnWorkload.of(plan.retention_size, 0.1)
        runs = {"sparkpoint-10s": lambda: retention.sparkpoint(
                    ctx, rw, "retention-sp", plan.retention_seconds, plan.sample_seconds,
                    gc_interval=plan.gc_interval, grace=plan.grace, grace_s=plan.grace_seconds),
                "vanilla-changelog": lambda: retention.vanilla(
                    ctx, rw, "retention-vanilla", jar_list, plan.retention_seconds, plan.sample_seconds)}
        for name in plan.retention_setups:
            r = attempt(f"retention {name}", runs[name])
            if r:
                out["retention"].append(r)
    if "replay" in plan.phases:
        ctx = ctx_at(0)
        rw = ChurnWorkload.of(plan.sizes[0], 0.1)
        # A checkpoint every ~10 batches lands in [kill_after, longer interval): before its first snapshot.
        kill_after = max(plan.replay_intervals) - 10
        for rnd in range(plan.replay_rounds):
            for n in plan.replay_intervals:
                r = attempt(f"replay minDeltasForSnapshot={n} round {rnd}", lambda n=n, rnd=rnd: replay.sparkpoint(
                    ctx, rw, f"replay-{n}-r{rnd}", n, kill_after))
                if r:
                    out["replay"].append(r)
    return out


def _churn(plan: ExtrasPlan, ctx: Context, lat: int, rnd: int, jar_list: str,
           attempt: Callable[[str, Callable[[], Any]], Any], out: dict[str, Any]) -> None:
    """One round of the churn phase at one latency: every size, churn and setup once."""
    sp_variants = [(f"sparkpoint-10s-{knob}{n}", {AB_KNOBS[knob]: str(n)})
                   for knob, values in (("nice", plan.churn_nice), ("inline", plan.churn_inline)) for n in values] \
        or [("sparkpoint-10s", {})]
    for size in plan.sizes:
        for c in plan.churns:
            cw = ChurnWorkload.of(size, c, steady_batches=plan.steady_batches, partitions=plan.churn_partitions)
            tag = f"churn-{size}-{int(c * 100)}pct-{lat}ms-r{rnd}"
            runs: list[tuple[str, Callable[[], Any]]] = []
            if "sparkpoint-10s" in plan.churn_setups:
                runs += [(name, lambda cw=cw, tag=tag, name=name, env=env: sparkpoint_setup.run_churn(
                    cw, ctx, f"{tag}-{name}", setup=name, env=env)) for name, env in sp_variants]
            if "vanilla-changelog" in plan.churn_setups:
                runs.append(("vanilla-changelog", lambda cw=cw, tag=tag: vanilla.run_churn(
                    cw, ctx, tag + "-vanilla", jar_list, ["--changelog"])))
            d = flink.flink_dir()
            if d is not None and plan.flink and "flink" in plan.churn_setups:
                runs.append(("flink", lambda cw=cw, tag=tag, d=d: flink.run_churn(
                    cw, ctx, tag + "-flink", str(d / "venv" / "bin" / "python"), str(d / "plugins"))))
            for name, fn in runs:
                r = attempt(f"churn {size} {c:.0%} {name} {lat} ms round {rnd}", fn)
                if r:
                    r["rows_per_batch"], r["row_bytes"] = cw.rows_per_batch, cw.row_bytes
                    r["latency_ms"], r["round"], r["partitions"] = lat, rnd, cw.partitions
                    out["churn"].append(r)
