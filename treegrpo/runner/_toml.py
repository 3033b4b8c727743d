"""Writing the configs the runner hands to each service: tomli-w, after dropping unset values.

TOML has no null, and a section's `None` means "not set, take the service's default"; so keys
whose value is None are left out (at any depth, in tables and inline tables alike).
"""

from __future__ import annotations

from typing import Any

import tomli_w


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_without_none(v) for v in value]
    return value


def dump_toml(data: dict[str, Any]) -> str:
    """The TOML text of `data` (TypeError for a value TOML cannot hold, e.g. a None inside a list)."""
    return tomli_w.dumps(_without_none(data))
