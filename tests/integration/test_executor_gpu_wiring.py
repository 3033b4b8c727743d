"""The GPU-idle guard wired into the local sandbox, on a CPU machine: a scripted utilisation trace
stands in for NVML; the kill, the status and the recorded utilisation are the real ones."""

from __future__ import annotations

import asyncio

import pytest
from executor_helpers import make_config, run_code

from treegrpo_executor import LocalBackend, TraceReader

pytestmark = pytest.mark.timeout(60)
GPU_HEADER = "# /// script\n# [tool.resources]\n# cpu = 1\n# gpu = 1\n# ///\n"


async def backend_with(tmp_path, trace, devices=("0",)) -> LocalBackend:
    cfg = make_config(
        tmp_path,
        local={"gpu_devices": list(devices)},
        gpu_guard={"grace_s": 1.0, "poll_s": 0.1, "threshold_pct": 1.0},
    )
    b = LocalBackend(cfg, TraceReader(trace))
    await b.start()
    return b


async def test_gpu_node_idle_past_the_grace_is_killed_as_gpu_idle_error(tmp_path):
    b = await backend_with(tmp_path, [(0, 0.0)])
    out = await run_code(
        b,
        GPU_HEADER
        + "import os, time\nprint(os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\ntime.sleep(30)\n",
    )
    assert (out.status, out.exc_type, out.gpu_util) == ("crashed", "GpuIdleError", 0.0)
    assert 1.0 <= out.exec_time < 10 and out.term_tail == "0"


async def test_gpu_node_kept_busy_finishes_and_records_its_utilisation(tmp_path):
    b = await backend_with(tmp_path, [(0, 80.0)])
    out = await run_code(
        b,
        GPU_HEADER + "import time\ntime.sleep(2)\nopen('submission/submission.csv','w').write('id\\n1\\n')\n",
    )
    assert out.status == "ok" and out.gpu_util == 80.0


async def test_cpu_nodes_are_not_watched_and_see_no_gpu(tmp_path):
    b = await backend_with(tmp_path, [(0, 0.0)])
    out = await run_code(
        b, "import os, time\ntime.sleep(2)\nprint(repr(os.environ['CUDA_VISIBLE_DEVICES']))\n"
    )
    assert out.status == "no_submission" and out.gpu_util is None and out.term_tail == "''"


async def test_gpu_nodes_queue_for_the_only_device(tmp_path):
    b = await backend_with(tmp_path, [(0, 50.0)])
    code = GPU_HEADER + "import time\ntime.sleep(1.5)\n"
    t0 = asyncio.get_running_loop().time()
    first, second = await asyncio.gather(run_code(b, code, node="g1"), run_code(b, code, node="g2"))
    assert asyncio.get_running_loop().time() - t0 >= 3.0  # one device: the second waited for the first
    assert max(first.timings.pending, second.timings.pending) >= 1.4
