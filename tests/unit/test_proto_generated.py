"""The committed generated code matches the .proto sources (regenerated with the pinned grpcio-tools)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ["proto/treegrpo/v1/events.proto", "proto/treegrpo/v1/weights.proto"]
GENERATED = ["events_pb2.py", "events_pb2.pyi", "weights_pb2.py", "weights_pb2.pyi", "weights_pb2_grpc.py"]


def test_committed_generated_code_is_not_stale(tmp_path):
    grpc_tools = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is in the dev extra")
    args = [
        "protoc",
        f"-I{ROOT / 'proto'}",
        f"--python_out={tmp_path}",
        f"--pyi_out={tmp_path}",
        f"--grpc_python_out={tmp_path}",
        *[str(ROOT / p) for p in PROTOS],
    ]
    assert grpc_tools.main(args) == 0
    for name in GENERATED:
        fresh = (tmp_path / "treegrpo" / "v1" / name).read_text()
        committed = (ROOT / "treegrpo" / "v1" / name).read_text()
        assert fresh == committed, f"treegrpo/v1/{name} is stale: run `make proto` and commit"
