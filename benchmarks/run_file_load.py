"""What reading a run file costs a fresh process: typed through the config-class registry (now) vs
also importing the four services to reach their `config_cls` (what load_run_file did before).

Each sample is a new interpreter (imports are the cost); both arms interleaved, medians of --repeats.

    python benchmarks/run_file_load.py [--config treegrpo/examples/demo.toml] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

NOW = "from treegrpo.runner import load_run_file\nload_run_file({path!r})\n"
BEFORE = NOW + (
    "from treegrpo.plugins import service_class\n"
    "for n in ('sampler', 'executor', 'grader', 'learner'):\n    service_class(n).config_cls\n"
)
TIMED = "import time\nt = time.perf_counter()\n{body}print(time.perf_counter() - t)\n"


def sample(body: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", TIMED.format(body=body)], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="treegrpo/examples/demo.toml")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    runs: dict[str, list[float]] = {"registry": [], "import_services": []}
    for _ in range(a.repeats):
        runs["registry"].append(sample(NOW.format(path=a.config)))
        runs["import_services"].append(sample(BEFORE.format(path=a.config)))
    med = {k: round(statistics.median(v), 3) for k, v in runs.items()}
    print(json.dumps({"medians_s": med, "ratio": round(med["registry"] / med["import_services"], 3)}))


if __name__ == "__main__":
    main()
