"""Vendor the explorer's JavaScript libraries from the npm registry into treegrpo/report/explorer/vendor/.

    python scripts/vendor_report_js.py          # needs npm; rewrites vendor/ and vendor/manifest.json

Pinned versions below; each library's minified browser build is copied as published, with its
licence and, for bundles, the licences of what they bundle (d3 is 30 d3-* modules and 3 small
dependencies). `manifest.json` records name, version, files, sha256 and why we use it; the report
writer inlines the files named there and `tests/unit/test_report_html.py` checks the hashes.
Why these libraries: docs/REPORT.md, "The run explorer".
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "treegrpo" / "report" / "explorer" / "vendor"

# name, version, files to copy (package path -> vendored name), licence files, what it is for
LIBRARIES = [
    (
        "d3",
        "7.9.2",
        {"dist/d3.min.js": "d3.min.js"},
        "ISC",
        "tree layout (d3.tree over d3.hierarchy), pan and zoom of the tree (d3.zoom), SVG building",
    ),
    (
        "@highlightjs/cdn-assets",
        "11.12.0",
        {"highlight.min.js": "highlight.min.js", "styles/github.min.css": "highlight-github.min.css"},
        "BSD-3-Clause",
        "Python syntax colouring of a node's code",
    ),
    (
        "diff",
        "9.0.0",
        {"dist/diff.min.js": "diff.min.js"},
        "BSD-3-Clause",
        "line diff of a node's code vs its parent's",
    ),
    (
        "chart.js",
        "4.6.1",
        {"dist/chart.umd.min.js": "chart.umd.min.js"},
        "MIT",
        "the learning curves and crash share as charts, with interval bands",
    ),
]
# dependencies of d3-dsv's command-line tools (dsv2json ...), not part of the browser bundle
NOT_BUNDLED = {"commander", "iconv-lite", "rw", "safer-buffer"}
SCRIPT_ORDER = ["d3.min.js", "highlight.min.js", "diff.min.js", "chart.umd.min.js"]


def _licence_files(pkg: Path) -> list[Path]:
    return sorted(p for p in pkg.iterdir() if p.name.upper().startswith(("LICENSE", "LICENCE", "COPYING")))


def _bundled(modules: Path, name: str) -> list[str]:
    """The packages a bundle was built from: its own dependencies, transitively (d3: d3-*, ...)."""
    seen, todo = [], [name]
    while todo:
        pkg = todo.pop()
        meta = json.loads((modules / pkg / "package.json").read_text())
        for dep in sorted(meta.get("dependencies", {})):
            if dep not in seen and dep not in NOT_BUNDLED:
                seen.append(dep)
                todo.append(dep)
    return sorted(seen)


def _licence_text(modules: Path, name: str) -> str:
    parts = []
    for pkg in [name, *_bundled(modules, name)]:
        for f in _licence_files(modules / pkg):
            parts.append(f"== {pkg} ({f.name}) ==\n{f.read_text().strip()}\n")
    return "\n".join(parts)


def main() -> None:
    if shutil.which("npm") is None:
        sys.exit("npm is needed to vendor the explorer's libraries")
    with tempfile.TemporaryDirectory() as tmp:
        specs = [f"{name}@{version}" for name, version, *_ in LIBRARIES]
        subprocess.run(["npm", "init", "-y"], cwd=tmp, check=True, capture_output=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", *specs], cwd=tmp, check=True)
        modules = Path(tmp) / "node_modules"
        shutil.rmtree(VENDOR, ignore_errors=True)
        (VENDOR / "licenses").mkdir(parents=True)
        manifest = []
        for name, version, files, licence, why in LIBRARIES:
            got = json.loads((modules / name / "package.json").read_text())["version"]
            assert got == version, f"{name}: npm gave {got}, pinned {version}"
            out = {}
            for src, dst in files.items():
                data = (modules / name / src).read_bytes()
                (VENDOR / dst).write_bytes(data)
                out[dst] = hashlib.sha256(data).hexdigest()
            lic = f"licenses/{name.replace('/', '__').lstrip('@')}.txt"
            (VENDOR / lic).write_text(_licence_text(modules, name))
            manifest.append(
                {
                    "name": name,
                    "version": version,
                    "license": licence,
                    "files": out,
                    "license_file": lic,
                    "why": why,
                }
            )
    doc = {"scripts": SCRIPT_ORDER, "styles": ["highlight-github.min.css"], "libraries": manifest}
    (VENDOR / "manifest.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"vendored {len(manifest)} libraries into {VENDOR.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
