"""Hostile nodes through the containerised executor: node.sampled facts published on the stack's
NATS (as the sampler would), run by the executor's local sandbox inside its hardened container.
Each script reports what it could reach; every attempt must fail, and the executor stays up."""

from __future__ import annotations

import asyncio
import json
import re
import secrets

import pytest

from tests.integration.test_executor_service import wait_executed
from tests.stack._stack import Stack
from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.config import RunSpec
from treegrpo.runner import end_run
from treegrpo.v1 import events_pb2 as pb

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]
TASK = "spooky-mini"
REPORT = "import json\ndef report(**kw):\n    print('RESULT ' + json.dumps(kw), flush=True)\n"

HOSTILE = {
    # the answers, the executor's credentials, other processes: nothing of it is in the jail
    "secrets": REPORT
    + """import os, glob
seen = {}  # the task folders exist in the jail only as empty, unreadable covers
for side in ("private", "public"):
    try:
        seen[side] = os.listdir("/var/lib/treegrpo/tasks/" + side)
    except OSError as exc:
        seen[side] = type(exc).__name__
env = [k for k in os.environ if "NATS" in k or "PASSWORD" in k]
leaks = []
for f in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        if b"nats://" in open(f, "rb").read():
            leaks.append(f)
    except OSError:
        pass
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
report(tasks=seen, env=env, proc_leaks=leaks, pids=pids, input=sorted(os.listdir("input")))
""",
    # no network at all: not NATS by name or address, not the host, not the internet
    "network": REPORT
    + """import socket
out = {}
for name, addr in {"nats-by-name": ("nats", 4222), "nats-by-ip": ("{nats_ip}", 4222),
                   "gateway": ("{gateway}", 22), "internet": ("1.1.1.1", 443)}.items():
    try:
        socket.create_connection(addr, timeout=3).close()
        out[name] = "connected"
    except OSError as exc:
        out[name] = type(exc).__name__
report(**out)
""",
    # the read-only image, the executor's home and the config: not writable; /tmp is the node's own
    "writes": REPORT
    + """out = {}
for path in ("/opt/treegrpo/x", "/etc/x", "/var/lib/treegrpo/x", "/etc/treegrpo/executor.toml", "/tmp/x"):
    try:
        open(path, "a").write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = type(exc).__name__
report(**out)
""",
    # a fork bomb for 8 seconds: bounded by the node's process limit, then all of it is killed
    "forks": REPORT
    + """import os, time
n, end = 0, time.time() + 8
while time.time() < end:
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        n += 1
    except OSError:
        time.sleep(0.01)
report(forked=n)
""",
    "memory": "x = bytearray(64 * 2**30)\nprint(len(x))\n",
    # signals: the executor is in another pid namespace; pid 1 is the jail's root init, kill(-1)
    # reaches only the node's own processes
    "signals": REPORT
    + """import os, signal
try:
    os.kill(1, signal.SIGKILL)
    init = "killed"
except OSError as exc:
    init = type(exc).__name__
report(init=init)
os.kill(-1, signal.SIGKILL)
""",
    "ok": "open('submission/submission.csv', 'w').write('id,EAP,HPL,MWS\\n')\nprint('fine')\n",
}


def result(tail: str) -> dict:
    found = re.findall(r"^RESULT (.*)$", tail, re.M)
    assert found, tail
    return json.loads(found[-1])


async def run_hostile(stack: Stack, codes: dict[str, str]) -> dict[str, pb.NodeExecuted]:
    run_id = f"hostile-{secrets.token_hex(4)}"
    bus = await Bus.connect(stack.operator_url, "test/redteam", 10)
    try:
        spec = RunSpec(run_id=run_id, tasks=[TASK], rounds=1, train=False, resource_gate=True)
        body = pb.RunStarted(run_spec_json=spec.model_dump_json(), tasks=[TASK], rounds=1, resource_gate=True)
        await bus.publish(events.make_event(run_id, "test/runner", body))
        ids = {}
        for i, (name, code) in enumerate(codes.items()):
            ids[name] = events.node_id(run_id, TASK, 1, 0, i)
            sampled = pb.NodeSampled(
                node_id=ids[name],
                task=TASK,
                round=1,
                step=0,
                sibling_group=events.group_id(run_id, TASK, 1, 0),
                mode="draft",
                group_size=len(codes),
                index_in_group=i,
                code=code,
            )
            await bus.publish(events.make_event(run_id, "test/sampler", sampled))
        out = {name: await wait_executed(bus, node, timeout=180, run_id=run_id) for name, node in ids.items()}
        await end_run(bus, run_id, 1, "stopped", "hostile nodes done")  # never sampled by anyone later
        return out
    finally:
        await bus.close(2)


def sandbox_processes(stack: Stack) -> list[str]:
    """Processes of the sandbox uids (61000 + slot) left in the executor container."""
    code = """import os, json
left = []
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat(f"/proc/{p}").st_uid >= 61000:
            left.append(p)
    except OSError:
        pass
print(json.dumps(left))
"""
    return json.loads(stack.exec("executor", "python3", "-c", code).stdout)


def test_hostile_nodes_through_the_containerised_executor_are_contained(stack):
    nats = stack.inspect("nats")["NetworkSettings"]["Networks"]
    net = next(iter(nats.values()))
    codes = {
        k: v.replace("{nats_ip}", net["IPAddress"]).replace("{gateway}", net["Gateway"])
        for k, v in HOSTILE.items()
    }
    before = stack.inspect("executor")["State"]["StartedAt"]
    stack.compose("stop", "sampler", "learner", timeout=300)  # the nodes of this run come from the test alone
    try:
        got = asyncio.run(run_hostile(stack, codes))
    finally:
        stack.compose("start", "sampler", "learner", timeout=300)
    secrets_, network, writes = (
        result(got["secrets"].term_tail),
        result(got["network"].term_tail),
        result(got["writes"].term_tail),
    )
    assert all(v in ([], "PermissionError") for v in secrets_["tasks"].values()), secrets_
    assert secrets_["env"] == [] and secrets_["proc_leaks"] == [], secrets_
    assert "train.csv" in secrets_["input"], secrets_  # its own task's public data, at ./input
    assert secrets_["pids"][0] == 1 and len(secrets_["pids"]) <= 3, secrets_  # its own pid namespace
    assert "connected" not in network.values(), network
    assert [k for k, v in writes.items() if v == "written"] == ["/tmp/x"], writes
    forks = result(got["forks"].term_tail)
    assert 0 < forks["forked"] < 256, forks  # the node's process limit (caps.nproc), not the host's
    assert (got["memory"].status, got["memory"].exc_type) == ("crashed", "MemoryError")
    assert result(got["signals"].term_tail) == {"init": "PermissionError"}
    assert got["ok"].status == "ok" and got["ok"].submission_key
    assert all(
        n.where == got["ok"].where.split("/slot")[0] + n.where[n.where.index("/slot") :] for n in got.values()
    )
    # the executor survived all of it, in the same container, and left nothing running
    assert stack.inspect("executor")["State"]["StartedAt"] == before
    assert sandbox_processes(stack) == []
    stack.wait_healthy(timeout=240)
    print({name: (n.status, n.exc_type) for name, n in got.items()}, network, writes, forks)
