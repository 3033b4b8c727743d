"""Helpers of scripts/gpu_vllm.sh and scripts/gpu_fla.sh: trim wheels, check a wheel folder.

    python3 scripts/_gpu_wheels.py trim SRC.whl OUTDIR   # vLLM without FA2 and vllm-rs (289.6 -> ~151 MiB)
    python3 scripts/_gpu_wheels.py stored SRC.whl OUTDIR # uncompressed copy (Triton trimmed), for one xz
    python3 scripts/_gpu_wheels.py check DIR             # one version per distribution

Trim: `_vllm_fa2_C` is imported in a try/except and on SM90 (H100/H200) vLLM uses FA3; `vllm-rs` is
the opt-in Rust frontend. Their RECORD lines go too, so pip installs the rest without complaint.
On an A100 (SM80) keep FA2: do not trim.
"""

from __future__ import annotations

import collections
import sys
import zipfile
from pathlib import Path


def dropped(name: str) -> bool:
    return "_vllm_fa2_C" in name or name == "vllm/vllm-rs"


# Triton files a Hopper learner never loads: the sm_100+ ptxas, CUPTI and the proton profiler (only
# `triton.profiler` imports them), an instrumentation test library, the disassembler.
TRITON_UNUSED = (
    "triton/backends/nvidia/bin/ptxas-blackwell",
    "triton/backends/nvidia/bin/nvdisasm",
    "triton/backends/nvidia/lib/cupti/",
    "triton/_C/libproton.so",
    "triton/instrumentation/",
    "triton/plugins/libTritonPluginsTestLib.so",
)


def triton_unused(name: str) -> bool:
    return name.startswith(TRITON_UNUSED)


def trim(src: Path, outdir: Path, drop=dropped, compress: int | None = None) -> Path:
    """Copy of a wheel without the files `drop` names (and their RECORD lines); `compress` =
    ZIP_STORED leaves it uncompressed, so that one xz stream over several wheels compresses better."""
    outdir.mkdir(parents=True, exist_ok=True)
    dest = outdir / src.name
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in zin.infolist():
            if drop(info.filename):
                continue
            data = zin.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = "".join(f"{line}\n" for line in lines if not drop(line.split(",")[0])).encode()
            out.writestr(info, data, compress_type=info.compress_type if compress is None else compress)
    print(f"trimmed {src.name}: {src.stat().st_size / 2**20:.1f} -> {dest.stat().st_size / 2**20:.1f} MiB")
    return dest


def check(folder: Path) -> None:
    """Two versions of one distribution stop `pip install --no-deps` of the whole folder."""
    versions = collections.defaultdict(set)
    for wheel in folder.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        versions[name.lower().replace("_", "-")].add(version)
    twice = {n: v for n, v in versions.items() if len(v) > 1}
    if twice:
        sys.exit(f"more than one version of: {twice}")
    print(f"{len(versions)} distributions, one version each")


if __name__ == "__main__":
    if sys.argv[1:2] == ["trim"] and len(sys.argv) == 4:
        trim(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1:2] == ["stored"] and len(sys.argv) == 4:
        trim(Path(sys.argv[2]), Path(sys.argv[3]), triton_unused, zipfile.ZIP_STORED)
    elif sys.argv[1:2] == ["check"] and len(sys.argv) == 3:
        check(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
