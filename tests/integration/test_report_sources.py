"""The report measures imported seed runs on the bus exactly as it measures the files themselves.

Imports a private module: `treegrpo.report._html` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.archive_gen import generate
from treegrpo.archive import collect_facts, export_runs, import_root
from treegrpo.archive.cli import app as archive_app
from treegrpo.bus import Reads
from treegrpo.report import BusReading, build_report, write_report
from treegrpo.report._html import read_embedded as embedded

pytestmark = pytest.mark.timeout(90)


def _numbers(report) -> list[dict]:
    runs = report.data["runs"]
    for r in runs:
        r.pop("source")
    return runs


async def test_report_from_the_bus_equals_report_from_the_seed_root(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    ids = [r.run_id for r in await import_root(bus, src)]
    from_files = await build_report(src, ids, tmp_path / "files", "grpo_valid_only", gpus=2)
    from_bus = await build_report(bus, ids, tmp_path / "bus", "grpo_valid_only", gpus=2)
    assert _numbers(from_bus) == _numbers(from_files)
    assert (tmp_path / "bus" / "report.md").read_text().count("\n| crash rate |") == 1
    assert {p.name for p in (tmp_path / "bus").glob("*.png")} == {
        p.name for p in (tmp_path / "files").glob("*.png")
    }


async def test_a_report_read_in_the_exports_passes_equals_its_own_with_half_the_replays(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    run_id = (await import_root(bus, src))[0].run_id
    bus.reads = Reads()
    alone = await build_report(bus, [run_id], tmp_path / "alone")
    await export_runs(bus, [run_id], tmp_path / "export-alone")
    assert bus.reads.consumers == 4  # small facts and node.sampled: twice each
    bus.reads = Reads()
    facts = await collect_facts(bus, run_id)  # what the runner does at a run's end
    reading = BusReading(facts)
    await export_runs(
        bus, [run_id], tmp_path / "export", facts={run_id: facts}, on_sampled=lambda _r, b: reading.accept(b)
    )
    shared = write_report([reading.finish()], tmp_path / "shared")
    assert bus.reads.consumers == 2
    assert (tmp_path / "shared" / "report.md").read_text() == (tmp_path / "alone" / "report.md").read_text()
    assert embedded(shared.html_path.read_text()) == embedded(alone.html_path.read_text())
    exported = sorted(p.relative_to(tmp_path / "export") for p in (tmp_path / "export").rglob("*"))
    assert exported == sorted(
        p.relative_to(tmp_path / "export-alone") for p in (tmp_path / "export-alone").rglob("*")
    )


async def test_the_explorer_shows_imported_runs_from_the_bus_as_it_shows_the_files(bus, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    ids = [r.run_id for r in await import_root(bus, src)]
    pages = {
        where: embedded((await build_report(source, ids, tmp_path / where)).html_path.read_text())
        for where, source in (("files", src), ("bus", bus))
    }
    for page in pages.values():
        for run in page["runs"]:
            run.pop("source"), run.pop("versions")  # where it was read, and what the versions rest on
    assert pages["bus"] == pages["files"]  # nodes, texts, rounds, advantages, curves


def test_archive_and_report_commands_end_to_end(nats_server, tmp_path):
    src = tmp_path / "seed"
    generate(src, "small")
    runner = CliRunner()
    res = runner.invoke(archive_app, ["import", str(src), "--nats", nats_server.url])
    assert res.exit_code == 0, res.output
    assert "s25_full: 32 nodes" in res.output
    res = runner.invoke(
        archive_app,
        ["export", "s25_full", "s32_full", "--out", str(tmp_path / "out"), "--nats", nats_server.url],
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / "s32_full" / "timing.jsonl").is_file()

    import typer

    from treegrpo.report.cli import report

    cmd = typer.Typer()
    cmd.command()(report)
    res = runner.invoke(
        cmd, [str(tmp_path / "out"), "--json", "--out", str(tmp_path / "rep"), "--estimator", "rloo"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["estimator"] == "rloo" and [r["run_id"] for r in data["runs"]] == ["s25_full", "s32_full"]
    res = runner.invoke(cmd, ["s25_full", "--out", str(tmp_path / "rep2"), "--nats", nats_server.url])
    assert res.exit_code == 0, res.output
    assert "improve keeps a valid parent valid" in res.output and (tmp_path / "rep2" / "report.md").is_file()
