"""Headless Debian Chromium driven by Playwright, for the report explorer's browser test and benchmark.

Playwright's Python wheel ships its driver; the browser is Debian's `/usr/bin/chromium` (installed by
`make browser`), never a download (`playwright install` is not used). Every request the page makes
is routed through `Opened.requests` and refused unless it is the report file itself, so a page that
tries the network fails visibly instead of fetching.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


@contextlib.contextmanager
def browser(width: int = 1600, height: int = 1000) -> Iterator:
    """A persistent context on a fresh --user-data-dir (removed afterwards), as a person's browser."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError("no chromium: run `make browser` (apt-get install chromium chromium-driver)")
    with tempfile.TemporaryDirectory(prefix="treegrpo-chromium-") as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile,
            executable_path=exe,
            headless=True,
            args=FLAGS,
            viewport={"width": width, "height": height},
        )
        try:
            yield ctx
        finally:
            ctx.close()


@dataclass
class Opened:
    page: object
    url: str
    requests: list[str] = field(default_factory=list)  # every request the page tried, the file included
    console_errors: list[str] = field(default_factory=list)
    ready_ms: float = 0.0  # performance.now() when the explorer said it was ready (navigation start = 0)
    wall_s: float = 0.0  # goto + wait for ready, as the harness saw it


def open_report(ctx, path: Path, timeout_ms: int = 30_000) -> Opened:
    """Open `path` in a new page; refuse every request but the file; wait until the explorer is ready."""
    page = ctx.new_page()
    url = Path(path).resolve().as_uri()
    out = Opened(page, url)

    def route(r) -> None:
        out.requests.append(r.request.url)
        if r.request.url.split("#")[0] == url:
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and out.console_errors.append(m.text))
    page.on("pageerror", lambda e: out.console_errors.append(f"pageerror: {e}"))
    t0 = time.perf_counter()
    page.goto(url, wait_until="load", timeout=timeout_ms)
    # a selector, not wait_for_function: that evaluates a string, which the page's CSP forbids
    try:
        page.wait_for_selector("html[data-ready]", state="attached", timeout=timeout_ms)
    except Exception as exc:
        raise AssertionError(f"the explorer never got ready; console errors: {out.console_errors}") from exc
    out.wall_s = time.perf_counter() - t0
    out.ready_ms = page.evaluate("window.treegrpoReady")
    return out
