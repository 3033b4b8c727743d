"""The deployed NATS permissions (deploy/k8s/base/nats/accounts.conf) against a real nats-server.

The server here loads the very accounts file the deployments ship (users, passwords from the
environment, per-service subject permissions); only its listen address and store are local. Each
service user then does its real bus work through `treegrpo.bus` (ensure, publish its facts,
consume and ack on its durable, dead-letter, look up, replay, objects), and the forbidden
operations are shown refused: the executor cannot publish grades or policies, write adapters,
swallow another service's consumer or purge the stream.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from treegrpo import events
from treegrpo.bus import ADAPTERS, STREAM, SUBMISSIONS, Bus, Consumer, ConsumerOptions, PermanentError
from treegrpo.embedded import find_binary, free_port
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(90)

ACCOUNTS = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "base" / "nats" / "accounts.conf"
USERS = ("sampler", "executor", "grader", "learner", "operator", "sys")
# e.g. `"TREEGRPO/user:executor" - Publish Violation - Subject "tg.r1.node.graded.x"`
VIOLATION = re.compile(r'"\w+/user:(\w+)" - (Publish|Subscription) Violation - Subject "([^"]+)"')
RUN = "r1"


@dataclass
class SecuredNats:
    port: int
    passwords: dict[str, str]
    log: Path
    proc: subprocess.Popen

    def url(self, user: str) -> str:
        return f"nats://{user}:{self.passwords[user]}@127.0.0.1:{self.port}"

    def violations(self) -> list[tuple[str, str, str]]:
        """(user, kind, subject) of every permission violation the server logged so far."""
        return VIOLATION.findall(self.log.read_text()) if self.log.exists() else []


@pytest.fixture
def secured_nats(tmp_path):
    """nats-server with the shipped accounts file, loopback only, stopped by PID afterwards."""
    shutil.copy(ACCOUNTS, tmp_path / "accounts.conf")
    port, log = free_port(), tmp_path / "nats.log"
    conf = tmp_path / "nats.conf"
    conf.write_text(
        f'listen: "127.0.0.1:{port}"\nmax_payload: 8MB\nlog_file: "{log}"\n'
        f'jetstream {{ store_dir: "{tmp_path / "js"}" }}\ninclude ./accounts.conf\n'
    )
    passwords = {u: secrets.token_hex(12) for u in USERS}
    env = {f"TG_{u.upper()}_PASSWORD": p for u, p in passwords.items()}
    proc = subprocess.Popen(
        [find_binary(), "-c", str(conf)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(proc, port, log)
        yield SecuredNats(port, passwords, log, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait_listening(proc: subprocess.Popen, port: int, log: Path, wait_s: float = 15.0) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"nats-server exited {proc.returncode}: {log.read_text() if log.exists() else ''}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nats-server did not start")


# -- the facts each service produces, and the kinds it consumes -------------------------------------
def produced(user: str) -> list[pb.Event]:
    bodies = {
        "sampler": [
            pb.NodeSampled(node_id="n1", task="t", round=1, tokens_recorded=True),
            pb.TokensRecorded(node_id="n1", task="t", round=1),
            pb.RoundStarted(task="t", round=1),
            pb.RoundCompleted(task="t", round=1),
            pb.PolicyLoaded(version=1, sampler_id="s0"),
            pb.RunCompleted(outcome="ok"),
        ],
        "executor": [pb.NodeExecuted(node_id="n1", task="t", round=1, status="ok")],
        "grader": [
            pb.NodeGraded(node_id="n1", task="t", round=1, status="ok"),
            pb.GroupScored(sibling_group="g1"),
        ],
        "learner": [
            pb.LearnerStepped(step=1),
            pb.LearnerRestored(version=1, restore=1),
            pb.PolicyPublished(version=1, adapter_key="r1/v1.tar"),
        ],
    }[user]
    return [events.make_event(RUN, f"{user}/test", b) for b in bodies]


CONSUMES = {
    "sampler": [Kind.RUN_STARTED, Kind.NODE_GRADED],
    "executor": [Kind.NODE_SAMPLED, Kind.NODE_RETRIED],
    "grader": [Kind.NODE_EXECUTED],
    "learner": [Kind.GROUP_SCORED, Kind.POLICY_LOADED],
}


async def connect(server: SecuredNats, user: str) -> Bus:
    return await Bus.connect(server.url(user), f"{user}/test", timeout_s=5)


async def try_publish(bus: Bus, subject: str, payload: bytes = b"x", timeout: float = 1.5) -> bool:
    """True when the stream acknowledged it; False when the server refused (the ack never comes)."""
    try:
        await bus.nc.jetstream(timeout=timeout).publish(subject, payload)
        return True
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError, TimeoutError):
        return False


async def consume_own(bus: Bus, user: str, expected: int) -> Consumer:
    """The service's durable consumer, as the service runs it; the first event is dead-lettered."""
    stop, seen = asyncio.Event(), []

    async def on(event, delivery):
        seen.append(event)
        if len(seen) >= expected:
            stop.set()
        if len(seen) == 1:
            raise PermanentError("first one dead-lettered on purpose")

    consumer = Consumer(
        bus,
        user,
        [events.subject_filter(k) for k in CONSUMES[user]],
        on,
        ConsumerOptions(fetch_timeout_s=0.5),
    )
    await asyncio.wait_for(consumer.run(stop), 20)
    return consumer


# -- the tests ------------------------------------------------------------------------------------
async def test_executor_cannot_publish_grades_or_policies_while_grader_and_learner_can(secured_nats):
    executor, grader = await connect(secured_nats, "executor"), await connect(secured_nats, "grader")
    learner, operator = await connect(secured_nats, "learner"), await connect(secured_nats, "operator")
    try:
        await operator.ensure()
        assert not await try_publish(executor, "tg.r1.node.graded.x")
        assert not await try_publish(executor, "tg.r1.policy.published.1")
        assert not await try_publish(executor, "tg.r1.group.scored.g1")
        assert not await try_publish(executor, "tg.r1.tokens.recorded.x")  # the sampler's alone
        assert not await try_publish(grader, "tg.r1.tokens.recorded.x")
        assert not await try_publish(executor, "tg.r1.node.retried.x.2")  # the runner's alone
        assert await try_publish(executor, "tg.r1.node.executed.x")
        assert await try_publish(grader, "tg.r1.node.graded.x")
        assert not await try_publish(grader, "tg.r1.policy.published.1")
        assert await try_publish(learner, "tg.r1.policy.published.1")

        info = await operator.js.stream_info(STREAM, subjects_filter="tg.>")
        assert info.state.subjects == {
            "tg.r1.node.executed.x": 1,
            "tg.r1.node.graded.x": 1,
            "tg.r1.policy.published.1": 1,
        }
        refused = {(user, subject) for user, _, subject in secured_nats.violations()}
        assert refused == {
            ("executor", "tg.r1.node.graded.x"),
            ("executor", "tg.r1.policy.published.1"),
            ("executor", "tg.r1.group.scored.g1"),
            ("executor", "tg.r1.tokens.recorded.x"),
            ("grader", "tg.r1.tokens.recorded.x"),
            ("executor", "tg.r1.node.retried.x.2"),
            ("grader", "tg.r1.policy.published.1"),
        }
    finally:
        for b in (executor, grader, learner, operator):
            await b.close(2)


async def test_every_service_user_can_do_its_own_bus_work_without_a_violation(secured_nats):
    operator = await connect(secured_nats, "operator")
    await operator.ensure()
    # what each service consumes, published by the operator (it may publish anything)
    inputs = [
        pb.RunStarted(tasks=["t"]),
        pb.NodeGraded(node_id="n0"),
        pb.NodeGraded(node_id="n9"),
        pb.NodeSampled(node_id="n0"),
        pb.NodeSampled(node_id="n9"),
        pb.NodeExecuted(node_id="n0"),
        pb.NodeExecuted(node_id="n9"),
        pb.NodeRetried(node_id="n0", attempt=2),  # the runner's (--retry-masked): the operator's
        pb.NodeRetried(node_id="n9", attempt=2),
        pb.GroupScored(sibling_group="g0"),
        pb.PolicyLoaded(version=0, sampler_id="s0"),
    ]
    await operator.publish_many([events.make_event(RUN, "operator/test", b) for b in inputs])
    buses = {u: await connect(secured_nats, u) for u in CONSUMES}
    try:
        for user, bus in buses.items():
            await bus.ensure()  # the streams exist: info only
            for event in produced(user):
                assert await bus.publish(event) > 0
            expected = sum(
                1
                for k in CONSUMES[user]
                for _ in range(1 if k in (Kind.RUN_STARTED, Kind.POLICY_LOADED) else 2)
            )
            consumer = await consume_own(bus, user, expected)
            assert (consumer.processed, consumer.dead_lettered) == (expected - 1, 1)
            assert await bus.last_event(RUN, Kind.RUN_STARTED) is not None
            assert len([e async for e in bus.replay(RUN, kinds=[Kind.NODE_SAMPLED])]) >= 2
            assert sorted(await bus.last_events(RUN, Kind.NODE_SAMPLED, ["n0", "n9"])) == ["n0", "n9"]
            # the learner's read of a group: its node facts and the payload the sampler recorded
            pairs = [(Kind.NODE_SAMPLED, "n1"), (Kind.TOKENS_RECORDED, "n1")]
            assert set(await bus.last_facts(RUN, pairs)) == set(pairs)
            assert {events.subject(RUN, Kind.NODE_SAMPLED, n) for n in ("n0", "n9")} <= set(
                await bus.subjects(RUN)
            )
        await buses["executor"].put_object(SUBMISSIONS, "r1/n1/submission.csv", b"id,label\n1,0.5\n")
        assert await buses["grader"].get_object(SUBMISSIONS, "r1/n1/submission.csv") == b"id,label\n1,0.5\n"
        adapter = secrets.token_bytes(3 << 20)  # several 1 MiB chunks
        await buses["learner"].put_object(ADAPTERS, "r1/v1.tar", adapter)
        assert await buses["sampler"].get_object(ADAPTERS, "r1/v1.tar") == adapter
        await buses["learner"].put_object(
            ADAPTERS, "r1/v1.tar", adapter[:1000]
        )  # overwrite purges old chunks
        assert await buses["learner"].get_object(ADAPTERS, "r1/v1.tar") == adapter[:1000]
        dlq = await operator.js.stream_info("TREEGRPO_DLQ")
        assert dlq.state.messages == len(CONSUMES)
        assert secured_nats.violations() == []
    finally:
        for b in (*buses.values(), operator):
            await b.close(2)


async def test_executor_cannot_write_adapters_swallow_the_graders_work_or_purge_the_log(secured_nats):
    operator, executor = await connect(secured_nats, "operator"), await connect(secured_nats, "executor")
    try:
        await operator.ensure()
        await operator.publish(events.make_event(RUN, "operator/test", pb.NodeExecuted(node_id="n1")))
        await operator.js.add_consumer(
            STREAM,
            durable_name="grader",
            name="grader",
            filter_subject=events.subject_filter(Kind.NODE_EXECUTED),
        )
        js = executor.nc.jetstream(timeout=1.5)

        store = await js.object_store(ADAPTERS)
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await store.put("r1/v9.tar", b"poisoned adapter")
        assert not await try_publish(executor, f"$O.{ADAPTERS}.C.forged-chunk")
        assert not await try_publish(executor, f"$O.{ADAPTERS}.M.forged-meta")
        sub = await js.pull_subscribe_bind(durable="grader", stream=STREAM)
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await sub.fetch(1, timeout=1.5)
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await js.purge_stream(STREAM)
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
            await js.delete_consumer(STREAM, "grader")

        grader_view = await operator.js.consumer_info(STREAM, "grader")
        assert (grader_view.num_pending, grader_view.num_ack_pending) == (1, 0)  # still the grader's to take
        assert (await operator.js.stream_info(STREAM)).state.messages == 1
        refused = {subject for user, _, subject in secured_nats.violations() if user == "executor"}
        assert "$JS.API.CONSUMER.MSG.NEXT.TREEGRPO.grader" in refused
        assert f"$JS.API.STREAM.PURGE.{STREAM}" in refused
        assert f"$JS.API.CONSUMER.DELETE.{STREAM}.grader" in refused
        assert {f"$O.{ADAPTERS}.C.forged-chunk", f"$O.{ADAPTERS}.M.forged-meta"} <= refused
        assert (await operator.js.stream_info(f"OBJ_{ADAPTERS}")).state.messages == 0
    finally:
        await executor.close(2)
        await operator.close(2)


async def test_a_wrong_password_is_refused_and_the_system_user_lives_in_its_own_account(secured_nats):
    bad = f"nats://executor:{secured_nats.passwords['grader']}@127.0.0.1:{secured_nats.port}"
    with pytest.raises((nats.errors.Error, OSError)):
        await nats.connect(bad, connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=0)
    sys_nc = await nats.connect(secured_nats.url("sys"), connect_timeout=2)
    try:
        reply = await sys_nc.request("$SYS.REQ.SERVER.PING", b"", timeout=2)
        assert b'"server"' in reply.data
    finally:
        await sys_nc.close()


def test_the_health_probe_passes_with_each_services_own_credentials(secured_nats):
    """`treegrpo health`, the probe of every deployed service, works under these permissions."""
    from typer.testing import CliRunner

    from treegrpo.cli import app

    async def ensure() -> None:
        operator = await connect(secured_nats, "operator")
        await operator.ensure()
        await operator.close(2)

    asyncio.run(ensure())
    runner = CliRunner()
    for user in CONSUMES:
        res = runner.invoke(app, ["health", "--url", secured_nats.url(user), "--timeout", "5"])
        assert res.exit_code == 0, (user, res.output)
    wrong = f"nats://grader:{secured_nats.passwords['executor']}@127.0.0.1:{secured_nats.port}"
    assert runner.invoke(app, ["health", "--url", wrong, "--timeout", "2"]).exit_code == 1
    assert secured_nats.violations() == []


# -- runs scoped to one run id (`treegrpo run`): per-run durables ------------------------------------
async def test_each_service_drives_its_own_per_run_durable_under_its_credentials(secured_nats):
    """What a scoped run's services do: bind `<service>-<run>-<tag>`, consume, ack, dead-letter."""
    from treegrpo.service import durable_name

    operator = await connect(secured_nats, "operator")
    await operator.ensure()
    inputs = [pb.RunStarted(tasks=["t"]), pb.PolicyLoaded(version=0, sampler_id="s0")]
    for i in range(2):
        inputs += [pb.NodeGraded(node_id=f"n{i}"), pb.NodeSampled(node_id=f"n{i}")]
        inputs += [pb.NodeExecuted(node_id=f"n{i}"), pb.GroupScored(sibling_group=f"g{i}")]
        inputs += [pb.NodeRetried(node_id=f"n{i}", attempt=2)]
    published = [events.make_event(RUN, "operator/test", b) for b in inputs]
    await operator.publish_many(published)
    buses = {u: await connect(secured_nats, u) for u in CONSUMES}
    try:
        for user, bus in buses.items():
            durable = durable_name(user, RUN, secured_nats.url(user))
            assert durable.startswith(f"{user}-{RUN}-") and len(durable) == len(f"{user}-{RUN}-") + 16
            expected = sum(events.kind_of(e) in CONSUMES[user] for e in published)
            stop, seen = asyncio.Event(), []

            async def on(event, delivery, seen=seen, stop=stop, expected=expected):
                seen.append(event)
                if len(seen) >= expected:
                    stop.set()
                if len(seen) == 1:
                    raise PermanentError("first one dead-lettered on purpose")

            filters = [events.subject_filter(k, RUN) for k in CONSUMES[user]]
            consumer = Consumer(bus, durable, filters, on, ConsumerOptions(fetch_timeout_s=0.5), owner=user)
            await asyncio.wait_for(consumer.run(stop), 20)
            assert (consumer.processed, consumer.dead_lettered) == (expected - 1, 1), user
            await bus.nc.flush()
            info = await operator.js.consumer_info(STREAM, durable)
            assert (info.num_ack_pending, info.num_pending) == (0, 0), user  # every ack was taken
        dlq = await operator.js.stream_info("TREEGRPO_DLQ", subjects_filter="tgdlq.>")
        assert dlq.state.subjects == {f"tgdlq.{u}.{RUN}": 1 for u in CONSUMES}
        assert secured_nats.violations() == []
    finally:
        for b in (*buses.values(), operator):
            await b.close(2)


async def test_a_service_cannot_create_or_touch_another_services_consumers(secured_nats):
    """The executor against the grader's consumers, shared and per-run: it cannot re-configure them
    through the nameless create endpoint, list consumers to learn their names, delete them, or
    compute the grader's per-run name (that takes the grader's password)."""
    import json

    from treegrpo.service import durable_name

    operator, executor = await connect(secured_nats, "operator"), await connect(secured_nats, "executor")
    grader = await connect(secured_nats, "grader")
    try:
        await operator.ensure()
        await operator.publish(events.make_event(RUN, "operator/test", pb.NodeExecuted(node_id="n1")))
        theirs = durable_name("grader", RUN, secured_nats.url("grader"))
        wanted = events.subject_filter(Kind.NODE_EXECUTED, RUN)
        for name in (theirs, "grader"):  # the grader's per-run durable, and the shared one
            await grader.js.add_consumer(
                STREAM, durable_name=name, name=name, filter_subject=wanted, ack_policy="explicit"
            )
        assert durable_name("grader", RUN, secured_nats.url("executor")) != theirs
        for name in (theirs, "grader"):
            hijack = {
                "stream_name": STREAM,
                "config": {"name": name, "filter_subject": f"tg.{RUN}.node.sampled.>"},
            }
            with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
                await executor.nc.request(
                    f"$JS.API.CONSUMER.CREATE.{STREAM}", json.dumps(hijack).encode(), 1.5
                )
            with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
                await executor.nc.request(f"$JS.API.CONSUMER.DELETE.{STREAM}.{name}", b"", 1.5)
        for listing in ("NAMES", "LIST"):
            with pytest.raises((nats.errors.TimeoutError, TimeoutError)):
                await executor.nc.request(f"$JS.API.CONSUMER.{listing}.{STREAM}", b"{}", 1.5)
        for name in (theirs, "grader"):
            info = await operator.js.consumer_info(STREAM, name)
            assert (info.config.filter_subject, info.num_pending) == (wanted, 1), name  # untouched
        refused = {subject for user, _, subject in secured_nats.violations() if user == "executor"}
        assert {
            f"$JS.API.CONSUMER.CREATE.{STREAM}",
            f"$JS.API.CONSUMER.DELETE.{STREAM}.{theirs}",
            f"$JS.API.CONSUMER.NAMES.{STREAM}",
            f"$JS.API.CONSUMER.LIST.{STREAM}",
        } <= refused
    finally:
        for b in (executor, grader, operator):
            await b.close(2)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_scoped_run_through_each_services_own_credentials_completes(secured_nats, tmp_path):
    """`treegrpo run` on the deployed server: the runner as `operator`, each service as its own
    user; the run completes with exact counts and the server refuses nothing."""
    import subprocess

    from tests.e2e._harness import ROOT, env_for, prepare_home, read_log, run_argv, run_ids

    home = tmp_path / "home"
    model = prepare_home(home)
    src = home / "replay"  # scripts that write a submission: the executor stores it, the grader reads it
    src.mkdir()
    (src / "uniform.py").write_text(
        "import csv\nrows = list(csv.DictReader(open('input/test.csv')))\n"
        "with open('submission/submission.csv', 'w') as f:\n"
        "    f.write('id,EAP,HPL,MWS\\n' + ''.join(f\"{r['id']},0.2,0.3,0.5\\n\" for r in rows))\n"
    )
    sets = [f'sampler.model="{model}"', f'learner.model="{model}"', "run.rounds=1"]
    sets += [
        'sampler.backend="replay"',
        f'sampler.replay.source_dir="{src}"',
        "sampler.sampling.max_new_tokens=1024",
    ]
    sets += [f'runner.nats_url="{secured_nats.url("operator")}"']
    sets += [f'{user}.nats.url="{secured_nats.url(user)}"' for user in CONSUMES]
    argv = run_argv("treegrpo/examples/run-small.toml", sets=sets)
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (run_id,) = run_ids(home)
    log = read_log(home, run_id, url=secured_nats.url("operator"))
    e, g = 3, 2  # run-small.toml's tree, one task, one round
    assert log.counts[Kind.NODE_SAMPLED] == log.counts[Kind.NODE_GRADED] == e * g
    assert log.counts[Kind.GROUP_SCORED] == e and len(log.steps) == 1
    assert log.graded_status == {"ok": e * g}  # stored by the executor, read back by the grader

    async def names() -> list[str]:
        operator = await connect(secured_nats, "operator")
        try:
            return [c.name for c in await operator.js.consumers_info(STREAM) if run_id in c.name]
        finally:
            await operator.close(2)

    assert sorted(n.rsplit("-", 1)[0] for n in asyncio.run(names())) == sorted(
        f"{u}-{run_id}" for u in CONSUMES
    )
    assert secured_nats.violations() == []
