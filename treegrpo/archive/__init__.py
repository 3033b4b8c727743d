"""The archive: seed-format projections of the log (export) and the way back in (import).

    results = await export_runs(bus, ["20260701_231713"], "out/")   # out/<run_id>/round_N/...
    results = await import_root(bus, "path/to/seed-root")          # appends events, idempotent

Layout, key orders and rendered formats: docs/ARCHIVE.md.
"""

from treegrpo.archive._check import Violation, check_round, check_timing
from treegrpo.archive._export import (
    ArchiveInvariantError,
    collect_facts,
    export_run,
    export_runs,
    sampled_bodies,
)
from treegrpo.archive._import import ImportResult, import_root, import_run
from treegrpo.archive._join import RoundFacts, RunFacts, node_record, timing_line
from treegrpo.archive._read import Problem, SeedRound, SeedRun, find_runs, read_nodes, read_run
from treegrpo.archive._records import RecordError, parse_node, parse_summary, parse_timing
from treegrpo.archive._render import render_transcript, render_tree, walk
from treegrpo.archive._schema import (
    GATE_KEYS,
    GATE_NODE_KEYS,
    NODE_KEYS,
    PHASES,
    STATUSES,
    SUMMARY_KEYS,
    ChatMessage,
    GateNodeRecord,
    NodeRecord,
    RoundSummary,
    TimingLine,
    node_json,
    summary_json,
    timing_json,
)
from treegrpo.archive._summary import SampledFacts, derive_summary, round_summary, seed_summary
from treegrpo.archive._to_events import PRODUCER
from treegrpo.archive._writer import ExportResult

__all__ = [
    "GATE_KEYS",
    "GATE_NODE_KEYS",
    "NODE_KEYS",
    "PHASES",
    "PRODUCER",
    "STATUSES",
    "SUMMARY_KEYS",
    "ArchiveInvariantError",
    "ChatMessage",
    "ExportResult",
    "GateNodeRecord",
    "ImportResult",
    "NodeRecord",
    "Problem",
    "RecordError",
    "RoundFacts",
    "RoundSummary",
    "RunFacts",
    "SampledFacts",
    "SeedRound",
    "SeedRun",
    "TimingLine",
    "Violation",
    "check_round",
    "check_timing",
    "collect_facts",
    "derive_summary",
    "export_run",
    "export_runs",
    "find_runs",
    "import_root",
    "import_run",
    "node_json",
    "node_record",
    "parse_node",
    "parse_summary",
    "parse_timing",
    "read_nodes",
    "read_run",
    "render_transcript",
    "render_tree",
    "sampled_bodies",
    "round_summary",
    "seed_summary",
    "summary_json",
    "timing_json",
    "timing_line",
    "walk",
]
