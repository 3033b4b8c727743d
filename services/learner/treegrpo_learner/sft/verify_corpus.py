"""Run every seed-corpus script on the generated public data and grade it with the grader.

    python -m treegrpo_learner.sft.verify_corpus [--tasks spooky-mini ...] [--jobs 2] [--sample N]

Each script runs as `python script.py` in a fresh temp workspace whose `./input` is a link to the
task's public folder (the private answers are never reachable from it), one CPU thread, a time
limit. Its submission is graded by the grader's own functions, and the outcome (final status,
metric, oriented metric, exception type, output tail, seconds) is written to the manifest's
`verified` block, which the pair builder reads (the debug prompts show that real output).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from treegrpo.events import Status
from treegrpo_learner.sft._corpus import CorpusScript, Verified, corpus_dir, load_corpus

TAIL_CHARS = 2000
_EXC = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt|Exit))\b", re.MULTILINE)


def run_code(
    code: str, public_dir: Path, timeout_s: float = 120.0, prefix: str = "sft-"
) -> tuple[str, str, Path | None, float, Path]:
    """(status, output tail, submission path or None, seconds, workspace). Status as the executor's."""
    ws = Path(tempfile.mkdtemp(prefix=prefix))
    (ws / "input").symlink_to(public_dir, target_is_directory=True)
    if not code.strip():
        return Status.NO_CODE, "", None, 0.0, ws
    (ws / "script.py").write_text(code)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(ws),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
    }
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "script.py"], cwd=ws, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        output, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output, rc = f"{exc.stdout or ''}{exc.stderr or ''}\nTimeoutError: exceeded {timeout_s}s", None
    seconds = time.perf_counter() - started
    output = output if isinstance(output, str) else output.decode(errors="replace")
    sub = ws / "submission" / "submission.csv"
    if rc is None:
        status = Status.TIMEOUT
    elif rc != 0:
        status = Status.CRASHED
    elif not sub.is_file():
        status = Status.NO_SUBMISSION
    else:
        status = Status.OK
    return status, output[-TAIL_CHARS:], (sub if status == Status.OK else None), seconds, ws


def exc_type_of(output: str) -> str | None:
    found = _EXC.findall(output)
    return found[-1].split(".")[-1] if found else None


def verify(script: CorpusScript, tasks: dict, timeout_s: float) -> Verified:
    """Run one corpus script and grade its submission."""
    return grade_code(script.code, tasks[script.task], timeout_s, prefix=f"corpus-{script.task}-")


def grade_code(code: str, task, timeout_s: float, prefix: str = "sft-") -> Verified:
    """Run code on a task's public data and grade its submission: the final status the grader
    would record (also what `benchmarks/sft_policy_probe.py` asks of sampled code)."""
    from treegrpo.tasks import grade_submission

    status, output, sub, seconds, ws = run_code(code, task.public_dir, timeout_s, prefix=prefix)
    metric = oriented = None
    try:
        if sub is not None:
            graded = grade_submission(task, sub)
            status, metric, oriented = graded.status, graded.test_metric, graded.oriented
            if graded.grade_error:
                output = f"{output}\n[grader] {graded.grade_error}"[-TAIL_CHARS:]
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    exc = exc_type_of(output) if status in (Status.CRASHED, Status.TIMEOUT) else None
    return Verified(status, metric, oriented, exc, output, round(seconds, 2))


def main(argv: list[str] | None = None) -> int:
    from treegrpo.tasks import ensure_builtin_tasks

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus", default="", help="corpus folder (default: the packaged one, treegrpo_learner/sft/corpus)"
    )
    ap.add_argument("--tasks", nargs="*", default=[], help="only these tasks")
    ap.add_argument("--names", nargs="*", default=[], help="only these scripts (file stems)")
    ap.add_argument("--jobs", type=int, default=2, help="scripts run at once")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per script")
    args = ap.parse_args(argv)
    root = corpus_dir(args.corpus)
    scripts = [
        s
        for s in load_corpus(root)
        if (not args.tasks or s.task in args.tasks) and (not args.names or s.name in args.names)
    ]
    tasks = ensure_builtin_tasks(tasks=sorted({s.task for s in scripts}))
    with ThreadPoolExecutor(args.jobs) as pool:
        results = dict(
            zip(
                [(s.task, s.name) for s in scripts],
                pool.map(lambda s: verify(s, tasks, args.timeout), scripts),
                strict=True,
            )
        )
    manifest = json.loads((root / "manifest.json").read_text())
    mismatches = 0
    for e in manifest["scripts"]:
        v = results.get((e["task"], e["name"]))
        if v is None:
            continue
        e["verified"] = asdict(v)
        agree = v.status == e["intended"]
        mismatches += not agree
        print(
            f"{e['task']:14s} {e['name']:26s} {v.status:18s} {v.test_metric!s:9s} {v.seconds:6.1f}s"
            f"{'' if agree else '  (intended ' + e['intended'] + ')'}"
        )
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(results)} scripts verified, {mismatches} differ from their intent")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
