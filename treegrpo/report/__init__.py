"""The capability report: the seed's measurements for any set of runs, side by side, with plots.

report = await build_report(bus, ["run-a", "run-b"], "out/report")      # from the log
report = await build_report("path/to/seed-root", [], "out/report")     # from a seed-format root
"""

from treegrpo.advantages import ESTIMATORS, has_signal
from treegrpo.advantages import compute as advantages
from treegrpo.report._build import Report, build_report, load_runs, write_report
from treegrpo.report._data import BusReading, Respent, RunData, load_from_bus, load_from_root
from treegrpo.report._learning_output import verdict_line
from treegrpo.report._metrics import (
    GpuStats,
    PhaseStat,
    Ratio,
    Respend,
    RoundRow,
    RunMetrics,
    Signal,
    compute,
)

__all__ = [
    "BusReading",
    "ESTIMATORS",
    "GpuStats",
    "PhaseStat",
    "Ratio",
    "Report",
    "Respend",
    "Respent",
    "RoundRow",
    "RunData",
    "RunMetrics",
    "Signal",
    "advantages",
    "build_report",
    "compute",
    "has_signal",
    "load_from_bus",
    "load_from_root",
    "load_runs",
    "verdict_line",
    "write_report",
]
