"""Async vs sync round period on the real process tree, with controllable durations.

Generation (replay backend delay), execution (a sleeping script) and training (the learner's
`step.min_seconds`) are set by config; the steady-state round period is read from the log's own
timestamps. Sync (max_staleness 0) is the baseline measured in the same run.

    python benchmarks/async_overlap.py [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.test_async_overlap import run_mode  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    rows = []
    for r in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            sync = run_mode(Path(tmp), 0)
            asyn = run_mode(Path(tmp), 1)
        rows.append((sync, asyn))
        print(
            f"repeat {r}: sync period {sync[0]:.1f}s (rollout {sync[1]:.1f} + train {sync[2]:.1f}); "
            f"async period {asyn[0]:.1f}s (rollout {asyn[1]:.1f}, train {asyn[2]:.1f})"
        )
    sync_p = statistics.median(s[0] for s, _ in rows)
    async_p = statistics.median(a[0] for _, a in rows)
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} 2 cores",
        "sync_period_s": sync_p,
        "async_period_s": async_p,
        "speedup": sync_p / async_p,
        "async_over_max": async_p / statistics.median(max(a[1], a[2]) for _, a in rows),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
