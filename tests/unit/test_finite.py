"""The check for NaN and inf in saved weights (`treegrpo.finite`), read in place from safetensors
files: it counts what torch counts, in every float dtype, across slices, and refuses a file that
safetensors itself would not load."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import load_file, save_file

from treegrpo.finite import nonfinite_in_folder

pytestmark = pytest.mark.timeout(60)

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e5m2, torch.float8_e4m3fn]


def torch_count(tensors: dict) -> int:
    """The reference: float32 copies through torch.isfinite (float8's inf saturates when cast)."""
    return sum(int((~torch.isfinite(t.float())).sum()) for t in tensors.values() if t.is_floating_point())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_inf_are_counted_as_torch_counts_them_in_every_float_dtype(tmp_path, dtype):
    bad = torch.randn(300, 17)
    bad[0, 0], bad[5, 3], bad[299, 16] = float("nan"), float("inf"), -float("inf")
    tensors = {"a.lora_A": bad.to(dtype), "b.lora_B": torch.randn(4, 9).to(dtype), "steps": torch.arange(7)}
    save_file(tensors, str(tmp_path / "adapter_model.safetensors"))
    expected = torch_count(load_file(str(tmp_path / "adapter_model.safetensors")))
    assert expected > 0
    assert nonfinite_in_folder(tmp_path) == {"adapter_model.safetensors": expected}


def test_clean_files_integer_tensors_and_empty_tensors_count_nothing(tmp_path):
    save_file(
        {"w": torch.randn(64, 8, dtype=torch.bfloat16), "empty": torch.zeros(0)},
        str(tmp_path / "a.safetensors"),
    )
    save_file({"ids": torch.full((5,), 0x7F80, dtype=torch.int16)}, str(tmp_path / "b.safetensors"))
    assert nonfinite_in_folder(tmp_path) == {}


def test_values_past_a_slice_boundary_and_at_the_end_are_counted(tmp_path):
    big = torch.zeros(12 << 20, dtype=torch.bfloat16)  # 24 MB: more than one slice
    for at in (0, (8 << 20) - 1, 8 << 20, (12 << 20) - 1):
        big[at] = float("nan")
    save_file(
        {"big": big, "after": torch.tensor([float("inf")], dtype=torch.bfloat16)},
        str(tmp_path / "a.safetensors"),
    )
    assert nonfinite_in_folder(tmp_path) == {"a.safetensors": 5}


def test_only_files_holding_any_are_reported_by_name_across_subfolders(tmp_path):
    (tmp_path / "inner").mkdir()
    save_file({"w": torch.ones(3)}, str(tmp_path / "clean.safetensors"))
    save_file({"w": torch.tensor([1.0, float("nan")])}, str(tmp_path / "inner" / "bad.safetensors"))
    (tmp_path / "notes.txt").write_text("nan inf")
    assert nonfinite_in_folder(tmp_path) == {"bad.safetensors": 1}


def write_raw(path, header: dict, data: bytes) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


@pytest.mark.parametrize(
    "header, data",
    [
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4),  # cut short
        ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),  # a gap first
        (
            {  # two tensors on the same bytes
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
            },
            b"\0" * 8,
        ),
        ({"w": {"dtype": "F32", "shape": [1]}}, b"\0" * 4),  # no offsets
        ({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 3]}}, b"\0" * 3),  # half a value
    ],
    ids=["truncated", "gap", "overlap", "no-offsets", "odd-bytes"],
)
def test_a_file_safetensors_would_not_load_is_refused_not_passed(tmp_path, header, data):
    path = tmp_path / "adapter_model.safetensors"
    write_raw(path, header, data)
    with pytest.raises(Exception):  # noqa: B017 (safetensors raises its own type)
        load_file(str(path))
    with pytest.raises(ValueError):
        nonfinite_in_folder(tmp_path)


def test_a_header_longer_than_the_file_is_refused(tmp_path):
    path = tmp_path / "adapter_model.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ValueError):
        nonfinite_in_folder(tmp_path)
