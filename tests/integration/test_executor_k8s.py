"""The k8s backend against the local API-server simulator (tests/k8s_sim), which really runs each
pod's command as a local process. What the simulator does not emulate is listed in its docstring.

Imports a private module: `treegrpo_executor._k8s` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from tests.k8s_sim import K8sSim
from treegrpo import events
from treegrpo.bus import SUBMISSIONS
from treegrpo.config import RunSpec
from treegrpo.events import Kind
from treegrpo.v1 import events_pb2 as pb
from treegrpo_executor import ExecutorConfig, Job, Limits, parse_declaration
from treegrpo_executor._k8s import K8sBackend
from treegrpo_executor.service import ExecutorService

pytestmark = pytest.mark.timeout(90)
NODE = events.node_id("r1", "t", 1, 0, 0)  # the id of its place in the tree: a made-up id is refused
OK_CODE = (
    "import os\nn = len(os.listdir('input'))\n"
    "open('submission/submission.csv','w').write(f'id,n\\n1,{n}\\n')\n"
)


@pytest.fixture
def sim(tmp_path):
    (tmp_path / "public" / "t").mkdir(parents=True)
    (tmp_path / "public" / "t" / "train.csv").write_text("a\n1\n")
    s = K8sSim(host_paths={"/data/treegrpo/public": str(tmp_path / "public")}, pending_s=0.3).start()
    yield s
    s.stop()


def config(sim: K8sSim, **over) -> ExecutorConfig:
    return ExecutorConfig(
        backend="k8s",
        timeout_s=over.pop("timeout_s", 20),
        max_concurrency=4,
        k8s={"api_url": sim.url, "python": sys.executable, "poll_s": 0.1},
        **over,
    )


async def run(backend: K8sBackend, code: str, node: str = "a1b2c3d4e5f6") -> object:
    decl = parse_declaration(code, backend.cfg.gate)
    return await backend.run(Job("r1", node, "t", code, Limits.for_node(decl, backend.cfg)))


async def test_pod_runs_the_script_and_the_submission_comes_back_through_its_log(sim):
    b = K8sBackend(config(sim))
    await b.start()
    out = await run(b, OK_CODE)
    assert out.status == "ok" and out.submission == b"id,n\n1,1\n"
    assert out.where == "k8s:tg-exec-r1-a1b2c3d4e5f6"
    assert out.timings.pending >= 0.25 and out.timings.exec > 0 and out.timings.stage > 0
    assert sim.pods == {} and sim.configmaps == {}, "pod and configmap are deleted after the node"
    verbs = {(m, p.split("/")[5]) for m, p in sim.requests}
    assert ("POST", "pods") in verbs and ("POST", "configmaps") in verbs and ("DELETE", "pods") in verbs


async def test_crash_and_missing_submission_are_statuses(sim):
    b = K8sBackend(config(sim))
    await b.start()
    crash, nosub = await asyncio.gather(
        run(b, "import nope\n", "000000000001"), run(b, "print('hi')\n", "000000000002")
    )
    assert (crash.status, crash.exc_type) == ("crashed", "ModuleNotFoundError")
    assert nosub.status == "no_submission" and nosub.term_tail == "hi"


async def test_a_symlinked_submission_folder_or_file_is_not_followed_in_the_pod(sim, tmp_path):
    b = K8sBackend(config(sim))
    await b.start()
    (tmp_path / "public" / "t" / "submission.csv").write_text("id\nnot-the-scripts\n")
    folder = "import os\nos.rmdir('submission')\nos.symlink('input', 'submission')\n"
    file = "import os\nos.symlink('../input/submission.csv', 'submission/submission.csv')\n"
    outs = await asyncio.gather(run(b, folder, "000000000003"), run(b, file, "000000000004"))
    assert [(o.status, o.submission) for o in outs] == [("no_submission", None)] * 2


async def test_timeout_deletes_the_pod_and_its_process(sim):
    b = K8sBackend(config(sim, timeout_s=1.5))
    await b.start()
    out = await run(b, "while True: pass\n")
    assert out.status == "timeout" and sim.pods == {}


async def test_service_shutdown_deletes_running_pods(sim):
    b = K8sBackend(config(sim))
    await b.start()
    task = asyncio.create_task(run(b, "import time\ntime.sleep(60)\n"))
    for _ in range(100):
        await asyncio.sleep(0.1)
        if any(p.proc is not None for p in sim.pods.values()):
            break
    pod = next(iter(sim.pods.values()))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await b.close()
    assert sim.pods == {} and pod.proc.poll() is not None


async def test_executor_service_on_the_k8s_backend_end_to_end(sim, bus, nats_server, tmp_path):
    spec = RunSpec(run_id="r1", tasks=["t"], rounds=1)
    await bus.publish(
        events.make_event(
            "r1", "test", pb.RunStarted(run_spec_json=spec.model_dump_json(), resource_gate=True)
        )
    )
    node = pb.NodeSampled(
        node_id=NODE,
        task="t",
        round=1,
        step=0,
        sibling_group=events.group_id("r1", "t", 1, 0),
        mode="draft",
        group_size=1,
        code="# /// script\n# [tool.resources]\n# cpu = 1\n# ///\n" + OK_CODE,
    )
    await bus.publish(events.make_event("r1", "test", node))
    cfg = config(sim, nats={"url": nats_server.url, "drain_timeout_s": 1})
    svc = ExecutorService(cfg)
    await svc.setup()
    task = asyncio.create_task(svc.run())
    try:
        for _ in range(300):
            got = await bus.last_event("r1", Kind.NODE_EXECUTED, NODE)
            if got:
                break
            await asyncio.sleep(0.1)
    finally:
        await svc.stop()
        await task
        await svc.close()
    ex = got.node_executed
    assert ex.status == "ok" and ex.where == f"k8s:tg-exec-r1-{NODE}" and ex.resources.cpu == 1
    assert ex.exec_timings.pending > 0
    assert await bus.get_object(SUBMISSIONS, ex.submission_key) == b"id,n\n1,1\n"
