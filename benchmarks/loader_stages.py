"""The sampler loader's unpack and check stages (`treegrpo.safetar.extract_data`,
`treegrpo.finite.nonfinite_in_folder`) against the code they replaced, each in a worker thread as
the loader runs them (`asyncio.to_thread`), with the process's other thread idle and busy:

    python benchmarks/loader_stages.py [--repeats 5] [--json out.json]

before  untar with tarfile's 16 KiB copy buffer; the check loading every tensor and counting with
        `torch.isfinite` (the code up to 2026-12-07)
after   untar in 8 MiB pieces; the check on the mapped file's exponent bits (numpy)
busy    a second thread runs Python the whole time (hashing 4 KiB pieces, a list comprehension):
        what a sampler's event loop does while it moves a push's chunks or, in the GPU benchmark,
        the learner's upload in the same process. Each time a stage's thread leaves the GIL (a read,
        a write, a torch op) it may wait up to the switch interval (5 ms) to get it back, so a
        stage pays per piece of work it hands to C, not per byte.

The archive: a bf16 LoRA r32 adapter of the 27B preset's shape (992 tensors, 467 MB; the one of
benchmarks/finite_check.py) in a tar, as the learner publishes it. Arms alternate within a repeat.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.finite_check import SHAPES, before, make_adapter, write_record  # noqa: E402


def untar_before(archive: Path, dest: Path) -> None:
    with tarfile.open(archive, "r:*") as tar:
        tar.extractall(dest, filter="data")


def busy(stop: threading.Event) -> None:
    piece, digest = b"x" * 4096, hashlib.sha256()
    while not stop.is_set():
        for _ in range(200):
            digest.update(piece)
            _ = [i for i in range(50)]


def one_pass(arm: str, archive: Path, work: Path) -> dict[str, float]:
    from treegrpo.finite import nonfinite_in_folder
    from treegrpo.safetar import extract_data

    untar, check = (untar_before, before) if arm == "before" else (extract_data, nonfinite_in_folder)
    folder = work / arm
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    started = time.perf_counter()
    untar(archive, folder)
    unpacked = time.perf_counter()
    found = check(folder)
    checked = time.perf_counter()
    if found != {"adapter_model.safetensors": 1}:
        raise SystemExit(f"{arm} found {found}, expected one NaN")
    shutil.rmtree(folder)
    return {"unpacked": unpacked - started, "checked": checked - unpacked}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_adapter(work / "src", *SHAPES["qwen36-27b"])
        archive = work / "adapter.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(work / "src" / "adapter_model.safetensors", arcname="adapter_model.safetensors")
        one_pass("after", archive, work)  # the page cache warm for both arms
        for load in ("idle", "busy"):
            stop = threading.Event()
            other = threading.Thread(target=busy, args=(stop,), daemon=True)
            if load == "busy":
                other.start()
            runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            try:
                for _ in range(a.repeats):
                    for arm in runs:
                        result: dict[str, float] = {}
                        worker = threading.Thread(
                            target=lambda arm=arm, r=result: r.update(one_pass(arm, archive, work))
                        )
                        worker.start()
                        worker.join()
                        runs[arm].append(result)
            finally:
                stop.set()
            for stage in ("unpacked", "checked"):
                row = {"load": load, "stage": stage, "mb": 467.1}
                row |= {
                    f"{arm}_s": round(statistics.median(r[stage] for r in rs), 3) for arm, rs in runs.items()
                }
                row["ratio"] = round(row["after_s"] / row["before_s"], 3)
                rows.append(row)
                print(json.dumps(row), flush=True)
    write_record(rows, a.json)


if __name__ == "__main__":
    main()
