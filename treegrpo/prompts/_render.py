"""Rendering the draft / improve / debug prompts from the template files in `templates/`.

`render_prompt` is pure (text in, chat messages out) so the SFT and learner code can render
training prompts exactly as the sampler does. The task description and data overview are read
from a task's public folder by `task_context`; nothing here ever reads a private folder.
"""

from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Literal

import jinja2

from treegrpo.config import treegrpo_home

Mode = Literal["draft", "improve", "debug"]
MODES: tuple[Mode, ...] = ("draft", "improve", "debug")
TRIM_AT = 5100  # AIDE trims a script's output once it passes ~5,100 characters ...
TRIM_KEEP = 2500  # ... to its first and last ~2,500
MAX_LISTED = 8  # files shown per folder in the data overview before summarising


def trim_output(text: str, limit: int = TRIM_AT, keep: int = TRIM_KEEP) -> str:
    """AIDE's output trimming: first and last `keep` characters once the text passes `limit`."""
    if len(text) <= limit:
        return text
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n... [{cut} characters trimmed] ...\n{text[-keep:]}"


def builtin_templates() -> list[Traversable]:
    """The built-in template files (system.md, draft.md, ...), sorted by name: package data read
    through importlib.resources, so they are found from an installed wheel as from the checkout."""
    folder = resources.files(__package__) / "templates"
    return sorted((t for t in folder.iterdir() if t.name.endswith(".md")), key=lambda t: t.name)


@functools.lru_cache(maxsize=8)
def _environment(template_dir: str | None) -> jinja2.Environment:
    """One environment per template folder: it keeps the parsed templates (re-read when a file changes)."""
    builtin = jinja2.PackageLoader(__package__, "templates")
    # a custom folder may override only some templates; the rest come from the package
    loader = (
        jinja2.ChoiceLoader([jinja2.FileSystemLoader(template_dir), builtin]) if template_dir else builtin
    )
    return jinja2.Environment(
        loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False
    )


def render_prompt(
    mode: Mode,
    task_description: str,
    data_overview: str,
    parent_code: str | None = None,
    parent_output: str | None = None,
    *,
    gpu_hint: bool = False,
    show_scores: bool = False,
    time_limit_s: int = 600,
    template_dir: str | Path | None = None,
) -> list[dict[str, str]]:
    """The chat messages ([system, user]) of one expansion; `parent_*` are required for improve/debug."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    if mode != "draft" and parent_code is None:
        raise ValueError(f"{mode} prompts need the parent's code")
    env = _environment(str(template_dir) if template_dir else None)
    values = dict(
        task_description=task_description.strip(),
        data_overview=data_overview.strip(),
        parent_code=(parent_code or "").strip("\n"),
        parent_output=trim_output(parent_output or "").strip("\n"),
        gpu_hint=gpu_hint,
        show_scores=show_scores,
        time_limit_min=max(1, round(time_limit_s / 60)),
    )
    system = env.get_template("system.md").render(**values).strip()
    user = env.get_template(f"{mode}.md").render(**values).strip()
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# ---- task context: description and data overview of a public folder ---------------------------
@dataclass(frozen=True)
class TaskContext:
    task: str
    public_dir: Path
    description: str
    data_overview: str


def find_public_dir(task: str, roots: list[str] | None = None) -> Path:
    """`<root>/<task>/` (built-in tasks) or `<root>/<task>/prepared/public/` (MLE-bench layout)."""
    search = [Path(r).expanduser() for r in (roots or [])] or [treegrpo_home() / "tasks" / "public"]
    for root in search:
        for candidate in (root / task, root / task / "prepared" / "public"):
            if (candidate / "description.md").is_file():
                return candidate
    raise FileNotFoundError(f"task {task!r}: no description.md under {[str(r) for r in search]}")


def task_context(task: str, roots: list[str] | None = None, csv_head_lines: int = 4) -> TaskContext:
    """Description + data overview of a task: its public folder's `description.md` when one exists,
    else the grader's task registry (which generates a built-in task on first use, or reads an
    MLE-bench competition from `roots`). Only the public side of a task is ever read."""
    try:
        public = find_public_dir(task, roots)
        description = (public / "description.md").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError as missing:
        public, description = _from_registry(task, roots, missing)
    return TaskContext(task, public, description, data_overview(public, csv_head_lines))


def _from_registry(task: str, roots: list[str] | None, missing: FileNotFoundError) -> tuple[Path, str]:
    # the task registry needs the core's `tasks` extra (pandas): every service that renders prompts
    # declares it (services/sampler/pyproject.toml), so a missing pandas is an ImportError, not a
    # prompt that silently lost its task description
    from treegrpo.tasks import UnknownTask, get_task

    try:
        found = get_task(task, mlebench_roots=roots or (), private=False)  # never write answers here
    except UnknownTask as exc:
        raise FileNotFoundError(f"{missing}; and the task registry: {exc}") from exc
    return Path(found.public_dir), found.description


def data_overview(public_dir: Path, csv_head_lines: int = 4) -> str:
    """A file listing of `./input/` (big folders summarised) plus the head of every top-level CSV."""
    lines = ["```", "input/"]
    lines += _listing(public_dir, depth=1)
    lines.append("```")
    for path in sorted(public_dir.glob("*.csv")):
        head = _csv_head(path, csv_head_lines)
        if head:
            lines += ["", f"`input/{path.name}` ({_row_count(path)} rows), first lines:", "```", *head, "```"]
    return "\n".join(lines)


def _listing(folder: Path, depth: int) -> list[str]:
    pad = "    " * depth
    entries = sorted(os.scandir(folder), key=lambda e: (not e.is_dir(), e.name))
    out: list[str] = []
    files = [e for e in entries if e.is_file()]
    for e in entries:
        if e.is_dir():
            inner = list(os.scandir(e.path))
            if len(inner) > MAX_LISTED and all(i.is_file() for i in inner):
                first = sorted(i.name for i in inner)[0]
                out.append(f"{pad}{e.name}/ ({len(inner)} files{_suffixes(inner)}, e.g. {first})")
            else:
                out.append(f"{pad}{e.name}/")
                out += _listing(Path(e.path), depth + 1) if depth < 3 else [f"{pad}    ..."]
    for e in files[:MAX_LISTED]:
        out.append(f"{pad}{e.name} ({_human(e.stat().st_size)})")
    if len(files) > MAX_LISTED:
        out.append(f"{pad}... and {len(files) - MAX_LISTED} more files")
    return out


def _suffixes(entries) -> str:
    kinds = sorted({Path(e.name).suffix for e in entries if Path(e.name).suffix})
    return f" {'/'.join(kinds)}" if kinds else ""


def _human(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _csv_head(path: Path, n: int, width: int = 300) -> list[str]:
    out = []
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        for i, row in enumerate(csv.reader(fh)):
            if i >= n:
                break
            line = ",".join(row)
            out.append(line if len(line) <= width else line[:width] + " ...")
    return out


def _row_count(path: Path) -> int:
    with open(path, "rb") as fh:
        return max(0, sum(1 for _ in fh) - 1)
