"""Start-up cost of a jail around `python -c pass`: bubblewrap against our launcher (issue 13).

Interleaved samples, same machine, same run:
  bare      python -c pass
  bwrap     bubblewrap: all namespaces (user included, for --uid), / read-only, private /proc /dev
            /tmp /var/tmp /run /dev/shm, a tmpfs workspace, uid drop, --die-with-parent
  launcher  services/executor/treegrpo_executor/_launch.py: pid/mount/net/ipc/uts namespaces, a tmpfs
            workspace with a byte and an inode limit, private /tmp /var/tmp /run /dev/shm /dev/mqueue,
            uid drop, rlimits, the keyring seccomp filter (no cgroup, no loop image: the tool's own cost)

    python benchmarks/sandbox_tools.py --samples 40
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from treegrpo_executor._launch import encode_spec  # noqa: E402

LAUNCHER = ROOT / "services" / "executor" / "_launch.py"
PY = sys.executable
UID = 62999


def bwrap_argv() -> list[str]:
    tmp = [a for d in ("/tmp", "/var/tmp", "/run", "/dev/shm", "/mnt") for a in ("--tmpfs", d)]
    return [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *tmp,
        "--uid",
        str(UID),
        "--gid",
        str(UID),
        "--chdir",
        "/mnt",
        PY,
        "-c",
        "pass",
    ]


def launcher_spec() -> bytes:
    return encode_spec(
        {
            "namespaces": True,
            "jail_dir": "/mnt",
            "cwd": "/mnt/work",
            "uid": UID,
            "gid": UID,
            "disk": {"kind": "tmpfs", "bytes": 64 * 2**20, "inodes": 4096},
            "code": b"pass\n",
            "rlimits": {"NPROC": 256, "NOFILE": 1024, "CORE": 0},
            "cpus": None,
            "hide": [],
            "mask_devices": [],
            "private_tmp": [("/tmp", "512m"), ("/var/tmp", "512m"), ("/run", "64m"), ("/dev/shm", "512m")],
            "expose": sorted({str(Path(PY).resolve().parents[1]), sys.prefix, sys.base_prefix}),
            "input_src": None,
            "argv": [PY, "-c", "pass"],
            "env": {"PATH": "/usr/bin:/bin"},
            "mask_sockets": [],
            "result_fd": 2,
            "submission_cap": 1,
        }
    )


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {proc.stderr.decode()[-400:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()
    ways = {
        "bare": lambda: timed([PY, "-c", "pass"]),
        "launcher": lambda: timed([PY, "-I", "-S", str(LAUNCHER)], launcher_spec()),
    }
    if shutil.which("bwrap"):
        ways["bwrap"] = lambda: timed(bwrap_argv())
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.samples):
        for k, f in ways.items():
            times[k].append(f())
    med = {k: 1000 * statistics.median(v) for k, v in times.items()}
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "samples": args.samples,
        **{f"{k}_median_ms": round(v, 1) for k, v in med.items()},
        **{f"{k}_over_bare_ms": round(v - med["bare"], 1) for k, v in med.items() if k != "bare"},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
