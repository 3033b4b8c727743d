"""A small TOML writer for the configs the runner hands to each service (tables, scalars, lists)."""

from __future__ import annotations

import json
from typing import Any


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_scalar(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dump_toml(data: dict[str, Any], prefix: str = "") -> str:
    lines = [f"{json.dumps(k) if not k.isidentifier() else k} = {_scalar(v)}"
             for k, v in data.items() if not isinstance(v, dict) and v is not None]
    for k, v in data.items():
        if isinstance(v, dict):
            name = f"{prefix}.{k}" if prefix else k
            body = dump_toml(v, name)
            lines.append(f"\n[{name}]\n{body}" if body.strip() else f"\n[{name}]")
    return "\n".join(lines).strip("\n") + "\n"
