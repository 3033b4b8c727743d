"""`report.html`: the run explorer as one self-contained file.

The page (`explorer/page.html`), its stylesheet and script, and the vendored libraries listed in
`explorer/vendor/manifest.json` are inlined at write time, with the data as a JSON script element.
Nothing is fetched when the page opens: a Content-Security-Policy of `default-src 'none'` forbids
every request, so it works from a laptop's disk or a CI artifact and cannot leak a run anywhere.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib import resources
from pathlib import Path

import orjson

MARKER = re.compile(r"@@([A-Z_]+)@@")
DATA = re.compile(r'<script type="application/json" id="treegrpo-data">(.*?)</script>', re.S)
SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.M)
UNSAFE = re.compile(r"<(?=!--|/script)", re.I)
# the page's own script, in load order: shared data and helpers, a node's page, the curves, the tree
SCRIPTS = ("common.js", "node.js", "curves.js", "tree.js")


def _asset(name: str) -> str:
    return (
        resources.files("treegrpo.report").joinpath("explorer", *name.split("/")).read_text(encoding="utf-8")
    )


@cache
def manifest() -> dict:
    return orjson.loads(_asset("vendor/manifest.json"))


def _script(text: str) -> str:
    """An inline script element. The HTML parser ends it at the first "</script" whatever the JS
    means, and a "<!--" can make it skip one; both can only sit in JS strings, regexes or comments
    (highlight.js matches HTML comments with /<!--/), where \\x3C is the same "<". A source-map
    comment would send devtools to fetch a file: dropped."""
    safe = UNSAFE.sub(lambda _: "\\x3C", SOURCE_MAP.sub("", text))
    return f"<script>{safe}</script>"


def _licences() -> str:
    m = manifest()
    parts = [f"{lib['name']} {lib['version']} ({lib['license']}): {lib['why']}" for lib in m["libraries"]]
    parts += [_asset("vendor/" + lib["license_file"]) for lib in m["libraries"]]
    return html.escape("\n".join(parts))


def data_json(payload: dict) -> str:
    """The payload as JSON that is safe inside a script element: "<" only occurs inside JSON strings,
    where \\u003c means the same, so no "</script" or "<!--" can end or confuse the element."""
    return orjson.dumps(payload).decode().replace("<", "\\u003c")


def read_embedded(page: str) -> dict:
    """The data document of a written report.html (for tools and tests)."""
    return orjson.loads(DATA.search(page).group(1))


def render(payload: dict) -> str:
    m = manifest()
    parts = {
        "TITLE": html.escape(payload.get("title", "treegrpo")),
        "VENDOR_CSS": "\n".join(_asset("vendor/" + f) for f in m["styles"]),
        "CSS": _asset("explorer.css"),
        "DATA": data_json(payload),
        "VENDOR_JS": "\n".join(_script(_asset("vendor/" + f)) for f in m["scripts"]),
        "JS": "\n".join(_script(_asset(f)) for f in SCRIPTS),
        "LICENSES": _licences(),
    }
    # one pass over the template: text put in is never scanned for markers again
    return MARKER.sub(lambda mt: parts[mt.group(1)], _asset("page.html"))


def write_html(path: str | Path, payload: dict) -> Path:
    path = Path(path)
    path.write_text(render(payload), encoding="utf-8")
    return path
