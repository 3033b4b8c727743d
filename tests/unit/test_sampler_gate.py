"""The version gate (no swap lands inside a group's generation) and the safe adapter unpacking.

Imports a private module: `treegrpo_sampler._adapters`, `treegrpo_sampler._adapters._untar` (what these
tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import asyncio
import io
import tarfile

import pytest

from treegrpo_sampler import VersionGate
from treegrpo_sampler._adapters import _untar


async def test_swap_waits_for_running_generation_and_new_generation_waits_for_a_pending_swap():
    gate, log = VersionGate(), []

    async def generate(name, hold):
        async with gate.generating():
            log.append(f"{name} start")
            await asyncio.sleep(hold)
            log.append(f"{name} end")

    async def swap():
        async with gate.swapping():
            log.append("swap")

    first = asyncio.create_task(generate("g1", 0.2))
    await asyncio.sleep(0.05)
    swapping = asyncio.create_task(swap())
    await asyncio.sleep(0.05)
    second = asyncio.create_task(generate("g2", 0.0))  # arrives while the swap waits: goes after it
    await asyncio.gather(first, swapping, second)
    assert log == ["g1 start", "g1 end", "swap", "g2 start", "g2 end"]


async def test_generations_run_concurrently_when_no_swap_is_pending():
    gate, active, peak = VersionGate(), [0], [0]

    async def generate():
        async with gate.generating():
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            await asyncio.sleep(0.05)
            active[0] -= 1

    await asyncio.gather(*(generate() for _ in range(4)))
    assert peak[0] == 4


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_adapter_archive_unpacks_flat_or_wrapped_in_one_folder(tmp_path):
    for i, members in enumerate(
        [
            {"adapter_config.json": b"{}", "adapter_model.safetensors": b"x"},
            {"v3/adapter_config.json": b"{}", "v3/adapter_model.safetensors": b"x"},
        ]
    ):
        archive = tmp_path / f"a{i}.tar"
        archive.write_bytes(_tar(members))
        _untar(archive, tmp_path / f"out{i}")
        assert sorted(p.name for p in (tmp_path / f"out{i}").iterdir()) == [
            "adapter_config.json",
            "adapter_model.safetensors",
        ]


def test_archive_escaping_its_folder_or_without_adapter_config_is_refused(tmp_path):
    evil = tmp_path / "evil.tar"
    evil.write_bytes(_tar({"../../escaped.txt": b"x", "adapter_config.json": b"{}"}))
    with pytest.raises(tarfile.TarError):
        _untar(evil, tmp_path / "out")
    assert not (tmp_path.parent / "escaped.txt").exists()
    empty = tmp_path / "empty.tar"
    empty.write_bytes(_tar({"README": b"no adapter here"}))
    with pytest.raises(ValueError):
        _untar(empty, tmp_path / "out2")
