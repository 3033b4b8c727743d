"""GPU-idle guard on a real NVIDIA GPU (marker `gpu`; run on the device machine, see docs/EXECUTOR.md).

Two sandboxed nodes declare a GPU: one trains (matmuls for ~25 s) and must finish `ok` with a high
measured utilisation; one takes the GPU and then sleeps, and must be killed as `crashed` /
`GpuIdleError` soon after the grace period, with its low utilisation recorded."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from treegrpo_executor import (
    ExecutorConfig,
    Job,
    Limits,
    LocalBackend,
    NvmlReader,
    parse_declaration,
)

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]
HEADER = "# /// script\n# [tool.resources]\n# cpu = 2\n# mem = 16\n# gpu = 1\n# ///\n"
BUSY = (
    HEADER
    + """import time, torch
x = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
t0 = time.time()
while time.time() - t0 < 25:
    for _ in range(50):
        y = x @ x
    torch.cuda.synchronize()
open('submission/submission.csv', 'w').write('id,v\\n1,%f\\n' % float(y[0, 0]))
print('trained on', torch.cuda.get_device_name(0))
"""
)
IDLE = (
    HEADER
    + """import time, torch
x = torch.zeros(1024, device='cuda')
print('holding', torch.cuda.get_device_name(0), flush=True)
time.sleep(120)
open('submission/submission.csv', 'w').write('id,v\\n1,0\\n')
"""
)
GRACE_S = 15.0


@pytest.fixture
async def backend(tmp_path):
    try:
        reader = NvmlReader()
    except Exception as exc:  # no driver library on this machine
        pytest.skip(f"NVML unavailable: {exc}")
    if reader.count() < 1:
        pytest.skip("no NVIDIA GPU visible through NVML")
    root = Path(tempfile.mkdtemp(prefix="tg-gpu-", dir="/tmp"))  # traversable even if the jail is unavailable
    os.chmod(root, 0o755)
    cfg = ExecutorConfig(
        timeout_s=200,
        max_concurrency=1,
        public_data_roots=[str(tmp_path)],
        local={"workspace_root": str(root / "ws"), "gpu_devices": ["0"], "hidden_paths": []},
        gpu_guard={"grace_s": GRACE_S, "poll_s": 1.0, "threshold_pct": 1.0},
        caps={"mem_gib": 64, "nproc": 4096},
    )
    b = LocalBackend(cfg, reader)
    await b.start()
    yield b
    await b.close()
    reader.close()
    shutil.rmtree(root, ignore_errors=True)


async def run(b: LocalBackend, code: str, node: str):
    return await b.run(
        Job("gpu", node, "t", code, Limits.for_node(parse_declaration(code, b.cfg.gate), b.cfg))
    )


async def test_busy_gpu_node_finishes_and_idle_gpu_node_is_killed_as_gpu_idle_error(backend):
    t0 = time.monotonic()
    busy = await run(backend, BUSY, "busy00000001")
    t_busy = time.monotonic() - t0
    t0 = time.monotonic()
    idle = await run(backend, IDLE, "idle00000001")
    t_idle = time.monotonic() - t0
    report = {
        "jailed": backend.jailed,
        "busy": [busy.status, busy.exc_type, busy.gpu_util, round(t_busy, 1)],
        "idle": [idle.status, idle.exc_type, idle.gpu_util, round(t_idle, 1)],
        "busy_tail": busy.term_tail[-300:],
        "idle_tail": idle.term_tail[-300:],
    }
    print(json.dumps(report))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_idle_guard.json").write_text(json.dumps(report, indent=1))
    assert busy.status == "ok", busy.term_tail
    assert busy.gpu_util is not None and busy.gpu_util > 50
    assert (idle.status, idle.exc_type) == ("crashed", "GpuIdleError"), idle.term_tail
    assert idle.gpu_util is not None and idle.gpu_util < 5
    assert GRACE_S <= t_idle < GRACE_S + 30  # killed soon after the grace, not at the 120 s sleep's end


async def test_a_cpu_node_cannot_reach_the_gpu_even_by_resetting_cuda_visible_devices(backend):
    code = (
        "# /// script\n# [tool.resources]\n# cpu = 2\n# mem = 32\n# ///\n"
        "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\nimport torch\n"
        "print('cuda', torch.cuda.is_available(), torch.cuda.device_count())\n"
        "open('submission/submission.csv', 'w').write('id\\n1\\n')\n"
    )
    out = await run(backend, code, "cpu000000001")
    print(json.dumps({"cpu_node": [out.status, out.term_tail[-200:]]}))
    assert out.status == "ok", out.term_tail
    assert "cuda False 0" in out.term_tail
