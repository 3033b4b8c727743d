"""Reading an untrusted submission file: size-checked and sniffed before pandas ever sees it.

Every way a file can be unreadable (too big, empty, binary, not UTF-8, not a CSV, no rows) becomes
an `InvalidSubmission` carrying a reason a person can act on; nothing here raises anything else
for a bad file.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

SNIFF_BYTES = 64 * 1024
# MLE-bench reads with float_precision="round_trip"; pandas 3 does so by default (and deprecates the flag)
READ_KW: dict = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class InvalidSubmission(ValueError):
    """The submission cannot be graded; `reason` says why, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def check_size(size: int, max_bytes: int) -> None:
    if size == 0:
        raise InvalidSubmission("submission.csv is empty (0 bytes)")
    if size > max_bytes:
        raise InvalidSubmission(f"submission.csv is {_human(size)}, over the {_human(max_bytes)} limit")


def _sniff(head: bytes) -> None:
    if b"\x00" in head:
        raise InvalidSubmission("submission.csv is a binary file (contains NUL bytes), not a CSV")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a multi-byte character cut at the sniff boundary is fine
            raise InvalidSubmission(
                f"submission.csv is not UTF-8 text (byte {exc.start}: {exc.reason})"
            ) from exc
        text = head[: exc.start].decode("utf-8")
    first = text.lstrip("\ufeff").split("\n", 1)[0].strip()
    if not first:
        raise InvalidSubmission("submission.csv has no header line (the first line is blank)")
    if "," not in first:
        raise InvalidSubmission(f"submission.csv is not a comma-separated file: header {first[:120]!r}")


def read_submission(
    source: Path | bytes, max_bytes: int = DEFAULT_MAX_BYTES, max_rows: int | None = None
) -> pd.DataFrame:
    """Read a submission CSV as MLE-bench does (round-trip float parsing), safely. With `max_rows`
    parsing stops there: a file with more rows than the answers is invalid whatever follows."""
    if isinstance(source, bytes):
        check_size(len(source), max_bytes)
        head = source[:SNIFF_BYTES]
    else:
        try:
            check_size(source.stat().st_size, max_bytes)
        except FileNotFoundError as exc:
            raise InvalidSubmission("no submission.csv was written") from exc
        if not source.is_file():
            raise InvalidSubmission("submission.csv is not a regular file")
        with open(source, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    _sniff(head)
    try:
        buf = io.BytesIO(source) if isinstance(source, bytes) else source
        frame = pd.read_csv(buf, encoding="utf-8", nrows=max_rows, **READ_KW)
    except pd.errors.EmptyDataError as exc:
        raise InvalidSubmission("submission.csv has no columns") from exc
    except (pd.errors.ParserError, csv.Error) as exc:
        raise InvalidSubmission(f"submission.csv is not a valid CSV: {_short(exc)}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidSubmission(f"submission.csv is not UTF-8 text ({exc.reason})") from exc
    except (ValueError, MemoryError, OverflowError) as exc:
        raise InvalidSubmission(f"submission.csv could not be read: {_short(exc)}") from exc
    if not isinstance(frame.index, pd.RangeIndex):  # pandas turns surplus leading fields into an index
        raise InvalidSubmission("submission.csv is not a valid CSV: rows have more fields than the header")
    if frame.empty:
        raise InvalidSubmission(
            f"submission.csv has a header ({', '.join(map(str, frame.columns))}) but no rows"
        )
    return frame


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"
