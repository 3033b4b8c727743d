"""Fuzzed messages on every subject a service consumes, beside a live run (issue 32, item 4).

The four services run as `treegrpo serve` processes on one nats-server (as compose runs them:
unscoped, every run), `treegrpo run --attach` drives a real run (run-small), and fuzz from
tests/bus_fuzz.py lands on every consumed subject while it runs: random and truncated bytes, an
unknown oneof field, wrong and missing run ids, a run that does not exist, ids that are not their
tree position's, attempts that never were, facts of the run repeated with other content, and an
8 MB object in each bucket named by a forged fact. Each stored message is dead-lettered with a
reason by every service that consumes its kind; no service dies; the run completes exactly.
Before this issue: a later `group.scored` with other rewards was trained and folded into the
sampler's tree, a second `run.started` replaced the spec every service read, a forged `run.ended`
of attempt 77 let the learner drop the run (which then never completed), and a bad `run.started`
of any run stopped an unscoped sampler's restart. On the code before this issue (main at c0d8e2a)
this test fails: the run stalls and exceeds its `runner.timeout_s` (240 s).
"""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from tests.bus_fuzz import CASES, CONSUMED, LOOKED_UP, Fuzzer, dead_letters, expected, run_facts
from tests.e2e._harness import (
    ROOT,
    env_for,
    export_records,
    prepare_home,
    read_log,
    run_argv,
    serve_four,
    stop,
)
from treegrpo.bus import Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
RUN = "fuzz_run_1"
PER_CASE = 2  # per kind and case in each of two waves (benchmarks/bus_fuzz.py sends 1,000 a subject)


async def fuzz(url: str, until_done: subprocess.Popen) -> list:
    bus = await Bus.connect(url, "test/fuzz", 10)
    fuzzer = Fuzzer(bus, RUN, seed=32, big=8 << 20)
    sent = []
    try:
        for wants in (Kind.NODE_SAMPLED, Kind.POLICY_PUBLISHED):  # early, then once a version is out
            facts = await _wait_for(bus, wants, until_done)
            for kind in (*CONSUMED, *LOOKED_UP):
                for case in CASES:
                    for _ in range(PER_CASE):
                        one = await fuzzer.one(kind, case, facts)
                        if one is not None:
                            sent.append(one)
    finally:
        await bus.close(2)
    return sent


async def _wait_for(bus: Bus, kind: Kind, run: subprocess.Popen) -> dict:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and run.poll() is None:
        facts = await run_facts(bus, RUN)
        if facts.get(kind):
            return facts
        await asyncio.sleep(0.5)
    raise AssertionError(f"the run wrote no {kind} (runner exit {run.poll()})")


async def settled(url: str, want: set, timeout: float = 90) -> dict:
    """The dead letters, once every expected one is there (the retried ones take ~20 s)."""
    bus = await Bus.connect(url, "test/fuzz-reader", 10)
    try:
        deadline = time.monotonic() + timeout
        while True:
            got = await dead_letters(bus)
            if want <= set(got) or time.monotonic() > deadline:
                return got
            await asyncio.sleep(1.0)
    finally:
        await bus.close(2)


def test_fuzz_on_every_consumed_subject_is_dead_lettered_with_a_reason_and_the_run_beside_it_is_exact(
    tmp_path,
):
    home = tmp_path / "home"
    model = prepare_home(home)
    server = EmbeddedNats(tmp_path / "nats").start()
    services = serve_four(home, server.url, model)
    try:
        sets = (f'runner.nats_url="{server.url}"', "runner.timeout_s=240", f'run.run_id="{RUN}"')
        argv = run_argv("treegrpo/examples/run-small.toml", "--attach", sets=sets)
        run = subprocess.Popen(
            argv, env=env_for(home), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        sent = asyncio.run(fuzz(server.url, run))
        out, _ = run.communicate(timeout=280)
        assert run.returncode == 0, out.decode()[-4000:]
        want = expected(sent)
        got = asyncio.run(settled(server.url, want))
        assert all(p.poll() is None for p in services), "a service died under the fuzz"

        missing = sorted(want - set(got))
        by_seq = {s.seq: s for s in sent}
        if missing:
            logs = {n: (home / f"{n}.log").read_text(errors="replace") for n in ("sampler", "learner")}
            said = {
                m: [ln for ln in logs.get(m[0], "").splitlines() if f"seq {m[1]}:" in ln] for m in missing
            }
        assert not missing, (
            f"{len(missing)} not dead-lettered: {[(m, by_seq[m[1]], said[m]) for m in missing[:6]]}"
        )
        assert all(got[k].strip() for k in want), "a dead letter without a reason"
        fuzzed = {s.seq for s in sent}
        assert {seq for _, seq in got} <= fuzzed, "a fact of the run itself was dead-lettered"
        assert {s.case for s in sent} == set(CASES)
        assert any(s.seq is None for s in sent)  # duplicates under the fact's own id: dropped by the server

        log = read_log(home, RUN, url=server.url)
        tasks, rounds, e, g = 1, 2, 3, 2
        assert log.counts[Kind.RUN_STARTED] == 1
        assert log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == tasks * rounds * e * g
        # one payload per node: the duplicates on their subjects are not facts
        assert log.counts[Kind.TOKENS_RECORDED] == tasks * rounds * e * g
        assert any(s.kind == Kind.TOKENS_RECORDED and s.seq is not None for s in sent)
        assert log.counts[Kind.NODE_EXECUTED] == log.counts[Kind.NODE_GRADED] == tasks * rounds * e * g
        assert log.counts[Kind.GROUP_SCORED] == len(set(log.groups_scored)) == tasks * rounds * e
        assert len(log.steps) == rounds and len(set(log.groups_trained)) == len(log.groups_trained)
        assert len(export_records(home / "runs" / RUN / "export")) == tasks * rounds * e * g
    finally:
        codes = stop(services)
        server.stop()
    assert codes == [0, 0, 0, 0], f"services did not drain on SIGTERM: {codes}"
