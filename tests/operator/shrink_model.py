"""Shrink what the machine model found into FOUND rows (docs/reliability.md, "The machine model").

    .venv/bin/python tests/operator/shrink_model.py LOG

LOG is the output of a failing long run (SPARKPOINT_MODEL_STEPS=100000 pytest -s ... test_machine_model).
Each failing case's steps are parsed from hypothesis' printout, replayed, and cut by delta debugging
to a shortest sequence that still fails with the same kind of violation (numbers in the message
ignored), printed as a FOUND row to paste into model_found.py. Hypothesis' own shrinking
stops early on long stateful runs; this finishes the job offline.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_world import ModelViolation  # noqa: E402
from test_machine_model import MachineModel  # noqa: E402

Steps = list[tuple[str, dict]]
STEP = re.compile(r"(?:\||E)\s+state\.(\w+)\((.*)\)\s*$")
NOT_STEPS = ("world_invariants", "teardown")


def parse(log: str) -> list[tuple[str, Steps]]:
    """(violation message, steps) of each failing case printed in the log."""
    cases: list[tuple[str, Steps]] = []
    for line in log.splitlines():
        found = re.search(r"ModelViolation: (.*)", line)
        if found:
            cases.append((found.group(1), []))
            continue
        step = STEP.search(line)
        if step and cases and step.group(1) not in NOT_STEPS:
            call = ast.parse(f"f({step.group(2)})", mode="eval").body
            assert isinstance(call, ast.Call)
            cases[-1][1].append((step.group(1), {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
    return cases


def replay(steps: Steps) -> str | None:
    """The violation the steps end in, else None (as test_found_by_the_model runs them)."""
    model = MachineModel()
    model.world.step = 1
    try:
        for name, args in steps:
            getattr(model, name)(**args)
            model.world_invariants()
    except ModelViolation as violation:
        return str(violation)
    return None


def kind(message: str | None) -> str | None:
    return re.sub(r"[-\d]+", "#", message)[:45] if message else None


def ddmin(steps: Steps, target: str | None) -> Steps:
    """Zeller's delta debugging: drop chunks while the same kind of violation remains."""
    n = 2
    while len(steps) >= 2:
        chunk = max(1, len(steps) // n)
        for i in range(0, len(steps), chunk):
            candidate = steps[:i] + steps[i + chunk:]
            if kind(replay(candidate)) == target:
                steps, n = candidate, max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(len(steps), n * 2)
    return steps


def main(path: str) -> int:
    for message, steps in parse(Path(path).read_text()):
        got = replay(steps)
        print(f"== {message[:160]}\n   replayed: {(got or 'passes now')[:160]}")
        if got:
            small = ddmin(steps, kind(got))
            print(f"   {len(small)} steps: {replay(small)}\nFOUND[\"...\"] = {small!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
