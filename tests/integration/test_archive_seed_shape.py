"""The seed root's exact shape (8 runs, 2,848 nodes, its partial and stub rounds) through the log."""

from __future__ import annotations

import json

import pytest

from tests.archive_gen import generate
from treegrpo.archive import export_runs, import_root
from treegrpo.report import build_report

pytestmark = pytest.mark.timeout(120)

NODES = {
    "20260701_223600": 128,
    "20260701_231713": 640,
    "20260702_020809": 158,
    "20260702_041208": 768,
    "20260702_073759": 192,
    "20260702_152844": 640,
    "20260702_183315": 273,
    "20260702_221522": 49,
}


async def test_seed_shaped_root_round_trips_and_reports_the_same_from_bus_and_files(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "seedshape")
    imported = {r.run_id: r for r in await import_root(bus, src)}
    assert {k: r.nodes for k, r in imported.items()} == NODES and sum(NODES.values()) == 2848
    out = tmp_path / "out"
    exported = {r.run_id: r for r in await export_runs(bus, list(NODES), out)}
    assert {k: r.nodes for k, r in exported.items()} == NODES
    # the seed's odd cases, as section 2 lists them
    assert (out / "20260701_231713" / "round_11").is_dir()
    assert [p.stat().st_size for p in (out / "20260701_231713" / "round_11").iterdir()] == [0]
    assert not list((out / "20260702_020809" / "round_3").glob("*summary*"))
    assert len((out / "20260702_041208" / "timing.jsonl").read_text().splitlines()) == 11
    assert list((out / "20260702_041208" / "round_12").glob("*summary*"))
    assert not (out / "20260702_221522" / "timing.jsonl").exists()
    cactus = [json.loads(x) for x in (out / "20260702_152844" / "timing.jsonl").read_text().splitlines()]
    assert [("save_checkpoint" in t["phases_s"]) for t in cactus] == [False] * 9 + [True]
    for f in src.rglob("*.jsonl"):
        rel = f.relative_to(src)
        assert [json.loads(x) for x in (out / rel).read_text().splitlines()] == [
            json.loads(x) for x in f.read_text().splitlines()
        ], rel
    files = (await build_report(src, [], tmp_path / "r1")).data["runs"]
    from_bus = (await build_report(bus, list(NODES), tmp_path / "r2")).data["runs"]
    for a, b in zip(files, from_bus, strict=True):
        a.pop("source"), b.pop("source")
        assert a == b
