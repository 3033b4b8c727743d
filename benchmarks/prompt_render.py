"""Prompt rendering: one Jinja2 environment per template folder (kept, with its parsed templates)
vs a new environment per prompt (what the sampler and the SFT did before issue 16).

    python benchmarks/prompt_render.py [--renders 200] [--repeats 7]

Each repeat renders `--renders` improve prompts (system + user, the sampler's own templates and a
~6.8 kB parent output, trimmed as the sampler trims it) both ways, interleaved; the figure is the
median time per prompt over the repeats. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from treegrpo.prompts import _render  # noqa: E402


def per_prompt_ms(renders: int) -> float:
    code, output = "import pandas as pd\n" * 40, "epoch 1 loss 0.5\n" * 400
    started = time.perf_counter()
    for _ in range(renders):
        _render.render_prompt(
            "improve", "Predict the author of each sentence.", "input/\n    train.csv", code, output
        )
    return (time.perf_counter() - started) / renders * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--renders", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    cached_env = _render._environment
    kept, fresh = [], []
    for _ in range(a.repeats):
        _render._environment = cached_env
        kept.append(per_prompt_ms(a.renders))
        _render._environment = cached_env.__wrapped__  # a new environment (and template parse) per prompt
        fresh.append(per_prompt_ms(a.renders))
    _render._environment = cached_env
    k, f = statistics.median(kept), statistics.median(fresh)
    print(
        json.dumps(
            {
                "renders": a.renders,
                "repeats": a.repeats,
                "kept_env_ms": round(k, 4),
                "new_env_per_prompt_ms": round(f, 3),
                "speedup": round(f / k, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
