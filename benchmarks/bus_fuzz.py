"""Fuzz every subject the services consume, 1,000 messages each, beside a live run (issue 32, item 4).

The four services run apart (`treegrpo serve`, unscoped, as compose runs them) on one nats-server;
`treegrpo run --attach` drives run-small; the fuzz of tests/bus_fuzz.py (its nine cases in turn,
100 MB objects for the oversized ones) lands on every consumed subject while the run runs. Prints,
per kind and case, what was sent, stored and dead-lettered by each consumer, how long the dead
letters took to settle, whether every service is alive, and whether the run is exact.

    PYTHONPATH=.:services/sampler:services/executor:services/grader:services/learner \\
        python benchmarks/bus_fuzz.py [--per-subject 1000] [--big-mb 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.bus_fuzz import CASES, CONSUMED, Fuzzer, dead_letters, expected, run_facts  # noqa: E402
from tests.e2e._harness import (  # noqa: E402
    ROOT,
    env_for,
    export_records,
    prepare_home,
    read_log,
    run_argv,
    serve_four,
    stop,
)
from treegrpo.bus import Bus  # noqa: E402
from treegrpo.embedded import EmbeddedNats  # noqa: E402
from treegrpo.events import Kind  # noqa: E402

RUN = "fuzz_bench_1"


async def fuzz(url: str, run: subprocess.Popen, per_subject: int, big: int) -> tuple[list, float]:
    bus = await Bus.connect(url, "bench/fuzz", 10)
    fuzzer = Fuzzer(bus, RUN, seed=32, big=big)
    sent: list = []
    started = time.monotonic()
    try:
        facts = {}
        while run.poll() is None and not facts.get(Kind.NODE_SAMPLED):
            facts = await run_facts(bus, RUN)
            await asyncio.sleep(0.5)
        for kind in CONSUMED:
            made, i = 0, 0
            while made < per_subject:
                one = await fuzzer.one(kind, CASES[i % len(CASES)], facts)
                i += 1
                if one is not None:
                    sent.append(one)
                    made += 1
            facts = await run_facts(bus, RUN)  # later kinds duplicate what the run wrote meanwhile
    finally:
        await bus.close(2)
    return sent, time.monotonic() - started


async def settle(url: str, want: set, timeout: float) -> tuple[dict, float]:
    bus = await Bus.connect(url, "bench/fuzz-reader", 10)
    started = time.monotonic()
    try:
        while True:
            got = await dead_letters(bus)
            if want <= set(got) or time.monotonic() - started > timeout:
                return got, time.monotonic() - started
            await asyncio.sleep(2.0)
    finally:
        await bus.close(2)


def table(sent: list, got: dict) -> dict:
    rows: dict = {}
    for s in sent:
        row = rows.setdefault(f"{s.kind} {s.case}", Counter())
        row["sent"] += 1
        row["stored"] += s.seq is not None
        for svc in CONSUMED[s.kind]:
            row[f"dl_{svc}"] += (svc, s.seq) in got
    return {k: dict(v) for k, v in sorted(rows.items())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-subject", type=int, default=1000)
    ap.add_argument("--big-mb", type=int, default=100)
    ap.add_argument("--settle-s", type=float, default=900)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the home and the store (some 200 MB)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bus-fuzz-"))
    home = tmp / "home"
    model = prepare_home(home)
    server = EmbeddedNats(tmp / "nats").start()
    services = serve_four(home, server.url, model)
    try:
        sets = (f'runner.nats_url="{server.url}"', "runner.timeout_s=1200", f'run.run_id="{RUN}"')
        argv = run_argv("treegrpo/examples/run-small.toml", "--attach", sets=sets)
        t0 = time.monotonic()
        run = subprocess.Popen(
            argv, env=env_for(home), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        sent, fuzz_s = asyncio.run(fuzz(server.url, run, args.per_subject, args.big_mb << 20))
        out, _ = run.communicate(timeout=1500)
        run_s = time.monotonic() - t0
        want = expected(sent)
        got, settle_s = asyncio.run(settle(server.url, want, args.settle_s))
        alive = [p.poll() is None for p in services]
        log = read_log(home, RUN, url=server.url)
        nodes = 1 * 2 * 3 * 2
        exact = (
            run.returncode == 0
            and log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == nodes
            and log.counts[Kind.NODE_GRADED] == nodes
            and log.counts[Kind.GROUP_SCORED] == len(set(log.groups_scored)) == nodes // 2
            and len(log.steps) == 2
            and len(set(log.groups_trained)) == len(log.groups_trained)
            and len(export_records(home / "runs" / RUN / "export")) == nodes
        )
        result = {
            "date": time.strftime("%Y-%m-%d"),
            "per_subject": args.per_subject,
            "big_mb": args.big_mb,
            "sent": len(sent),
            "stored": sum(s.seq is not None for s in sent),
            "dropped_by_server": sum(s.seq is None for s in sent),
            "dead_letters_expected": len(want),
            "dead_letters_found": len(want & set(got)),
            "dead_letters_without_reason": sum(1 for k in want & set(got) if not got[k].strip()),
            "dead_letters_of_the_run": sum(1 for _, seq in got if seq not in {s.seq for s in sent}),
            "fuzz_publish_s": round(fuzz_s, 1),
            "run_s": round(run_s, 1),
            "settle_after_run_s": round(settle_s, 1),
            "services_alive": alive,
            "run_exact": exact,
            "by_kind_and_case": table(sent, got),
        }
        if not exact:
            result["runner_tail"] = out.decode()[-3000:]
    finally:
        codes = stop(services)
        server.stop()
    result["service_exit_codes"] = codes
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    ok = result["run_exact"] and all(alive) and result["dead_letters_found"] == len(want)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
