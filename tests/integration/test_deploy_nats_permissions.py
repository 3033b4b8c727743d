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

from treegrpo import events as ev
from treegrpo.bus import Bus, Consumer, ConsumerOptions, PermanentError
from treegrpo.bus._client import ADAPTERS, STREAM, SUBMISSIONS
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
            pb.NodeSampled(node_id="n1", task="t", round=1),
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
    return [ev.make_event(RUN, f"{user}/test", b) for b in bodies]


CONSUMES = {
    "sampler": [Kind.RUN_STARTED, Kind.NODE_GRADED],
    "executor": [Kind.NODE_SAMPLED],
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
        bus, user, [ev.subject_filter(k) for k in CONSUMES[user]], on, ConsumerOptions(fetch_timeout_s=0.5)
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
        pb.GroupScored(sibling_group="g0"),
        pb.PolicyLoaded(version=0, sampler_id="s0"),
    ]
    await operator.publish_many([ev.make_event(RUN, "operator/test", b) for b in inputs])
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
        await operator.publish(ev.make_event(RUN, "operator/test", pb.NodeExecuted(node_id="n1")))
        await operator.js.add_consumer(
            STREAM, durable_name="grader", name="grader", filter_subject=ev.subject_filter(Kind.NODE_EXECUTED)
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
