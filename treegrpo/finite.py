"""Non-finite values in saved weights: what neither a checkpoint nor a served adapter may hold.

A NaN or inf in a LoRA adapter poisons every sample drawn with it (`probability tensor contains
either inf, nan`) and every step trained from it, so both ends check: the learner before it saves
or publishes, the sampler before it serves. torch is imported here only when a check runs.

A file is checked where it lies: its safetensors header is read, its data mapped (not copied) and
its exponent bits tested in slices of a few MB, one vectorised pass per run of tensors of one float
dtype. Loading each tensor (a copy) and `torch.isfinite` on it made this the slowest of the
sampler's stages for a 27B adapter (0.63-0.82 s of 467 MB on an H100 host; docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path

import numpy as np

# per safetensors float dtype: the unsigned integer of its width and the bits that, all set, make
# a value inf or NaN (float8 e4m3fn has no inf: its NaN is exponent and mantissa all set)
_EXPONENT = {
    "F64": (np.uint64, np.uint64(0x7FF0000000000000)),
    "F32": (np.uint32, np.uint32(0x7F800000)),
    "F16": (np.uint16, np.uint16(0x7C00)),
    "BF16": (np.uint16, np.uint16(0x7F80)),
    "F8_E5M2": (np.uint8, np.uint8(0x7C)),
    "F8_E4M3": (np.uint8, np.uint8(0x7F)),
}
_SLICE_BYTES = 16 << 20  # one slice's mask stays small; a slice is still one vectorised op
_HEADER_LIMIT = 100 << 20  # safetensors' own limit on a header


def nonfinite_in_tensors(tensors) -> int:
    """How many values of these tensors are NaN or +-inf."""
    import torch

    return int(sum((~torch.isfinite(t.detach())).sum().item() for t in tensors if t.is_floating_point()))


def nonfinite_in_folder(folder: Path) -> dict[str, int]:
    """{file name: non-finite values} for each `*.safetensors` file under `folder` that holds any.
    A file whose header or layout safetensors would not accept raises ValueError."""
    bad = {}
    for path in sorted(Path(folder).rglob("*.safetensors")):
        n = nonfinite_in_file(path)
        if n:
            bad[path.name] = n
    return bad


def nonfinite_in_file(path: Path) -> int:
    """How many values of a safetensors file are NaN or +-inf, read in place."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size  # the file being read, not whatever is at the path now
        spans, start = _layout(fh, size)
        if not spans or start == size:
            return 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return sum(_count(mm, start + begin, start + end, dtype) for dtype, begin, end in spans)


def _layout(fh, size: int) -> tuple[list[tuple[str, int, int]], int]:
    """The float tensors' byte spans (dtype, begin, end: relative to the data), runs of one dtype
    merged, and where the data starts; ValueError where the tensors do not tile the data exactly."""
    head = fh.read(8)
    if len(head) != 8:
        raise ValueError("shorter than a safetensors header")
    (length,) = struct.unpack("<Q", head)
    if length > min(_HEADER_LIMIT, size - 8):
        raise ValueError(f"header of {length} bytes does not fit the file")
    header = json.loads(fh.read(length))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    tensors = sorted(
        (_offsets(name, meta) for name, meta in header.items() if name != "__metadata__"),
        key=lambda t: t[1],
    )
    data_start, at = 8 + length, 0
    for name, begin, end, _ in tensors:
        if begin != at:
            raise ValueError(f"tensor {name} starts at {begin}, not at {at}: the data is not tiled")
        at = end
    if data_start + at != size:
        raise ValueError(f"the tensors cover {at} bytes of the {size - data_start} of data")
    spans: list[tuple[str, int, int]] = []
    for _, begin, end, dtype in tensors:
        if dtype not in _EXPONENT or end == begin:
            continue
        if spans and spans[-1][0] == dtype and spans[-1][2] == begin:
            spans[-1] = (dtype, spans[-1][1], end)
        else:
            spans.append((dtype, begin, end))
    return spans, data_start


def _offsets(name: str, meta) -> tuple[str, int, int, str]:
    try:
        begin, end = (int(x) for x in meta["data_offsets"])
        dtype = str(meta["dtype"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"tensor {name}: no dtype or data_offsets in the header") from exc
    if not 0 <= begin <= end:
        raise ValueError(f"tensor {name}: offsets {begin}..{end}")
    return name, begin, end, dtype


def _count(mm: mmap.mmap, begin: int, end: int, dtype: str) -> int:
    """Values whose exponent bits are all set (inf or NaN; for e4m3fn, exponent and mantissa):
    integer masks in numpy, a tenth of torch's `isfinite` on bf16 on the CPU (0.07 s against 0.9 s
    for 467 MB on the dev machine)."""
    kind, mask = _EXPONENT[dtype]
    item = np.dtype(kind).itemsize
    if (end - begin) % item:
        raise ValueError(f"{end - begin} bytes of {dtype} is not a whole number of values")
    values = np.frombuffer(mm, dtype=kind, count=(end - begin) // item, offset=begin)
    step = _SLICE_BYTES // item
    return sum(
        int(np.count_nonzero((values[at : at + step] & mask) == mask)) for at in range(0, values.size, step)
    )
