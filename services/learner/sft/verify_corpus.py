"""Run every seed-corpus script on the generated public data and grade it with the grader.

    python -m services.learner.sft.verify_corpus [--tasks spooky-mini ...] [--jobs 2] [--sample N]

Each script runs as `python script.py` in a fresh temp workspace whose `./input` is a link to the
task's public folder (the private answers are never reachable from it), one CPU thread, a time
limit. Its submission is graded by the grader's own functions, and the outcome (final status,
metric, oriented metric, exception type, output tail, seconds) is written to the manifest's
`verified` block, which the pair builder reads (the debug prompts show that real output).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from services.learner.sft._corpus import CorpusScript

TAIL_CHARS = 2000
_EXC = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt|Exit))\b", re.MULTILINE)


def run_script(script: CorpusScript, public_dir: Path, timeout_s: float = 120.0) -> tuple[str, str, Path | None, float, Path]:
    """(status, output tail, submission path or None, seconds, workspace). Status as the executor's."""
    ws = Path(tempfile.mkdtemp(prefix=f"corpus-{script.task}-"))
    (ws / "input").symlink_to(public_dir, target_is_directory=True)
    (ws / "script.py").write_text(script.code)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(ws), "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "script.py"], cwd=ws, env=env, capture_output=True,
                              text=True, timeout=timeout_s)
        output, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output, rc = f"{exc.stdout or ''}{exc.stderr or ''}\nTimeoutError: exceeded {timeout_s}s", None
    seconds = time.perf_counter() - started
    output = output if isinstance(output, str) else output.decode(errors="replace")
    sub = ws / "submission" / "submission.csv"
    if rc is None:
        status = "timeout"
    elif rc != 0:
        status = "crashed"
    elif not sub.is_file():
        status = "no_submission"
    else:
        status = "ok"
    return status, output[-TAIL_CHARS:], (sub if status == "ok" else None), seconds, ws


def exc_type_of(output: str) -> str | None:
    found = _EXC.findall(output)
    return found[-1].split(".")[-1] if found else None
