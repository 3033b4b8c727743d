"""What one service's install added to the core's virtual environment (service.Dockerfile, stdlib only).

    venv_delta.py slim VENV [PATH ...]       drop the test suites packages ship (`tests` folders in
                                             site-packages: pandas', scipy's, ...; nothing imports them)
                                             and each PATH under site-packages that the service never
                                             imports (e.g. kubernetes/aio); a PATH that is not there
                                             fails the build (a dependency changed its layout)
    venv_delta.py snapshot VENV MANIFEST     after the core is installed
    venv_delta.py diff VENV MANIFEST OUT [NEW_MANIFEST]
                                             after the next install: new or changed files (and
                                             symlinks) are hard-linked under OUT at their own paths;
                                             NEW_MANIFEST: the snapshot after it, for the next stage

The runtime image copies the core's environment as one layer, the same in all four images, then
each OUT on top (the shared packages', then the service's). A file an install removed from what
was there before (pip replacing a dependency with another version) cannot be expressed by a layer
on top, so it fails the build instead of leaving two versions of a package in the image.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import sys


def _state(path: str) -> list:
    """What makes a file the same file: its content and mode. Not its mtime: a layer stores whole
    seconds, so every mtime with a fraction changes between one build stage and the next."""
    if os.path.islink(path):
        return ["link", os.readlink(path)]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return ["file", os.lstat(path).st_mode, digest.hexdigest()]


def walk(venv: str) -> dict[str, list]:
    """Every file and symlink under `venv` (folders are implied by their contents)."""
    found = {}
    for folder, dirs, files in os.walk(venv):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            found[path] = _state(path)
    return found


def copy_out(path: str, out: str) -> None:
    target = out + path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.islink(path):
        os.symlink(os.readlink(path), target)
    else:
        os.link(path, target)  # a hard link: the stage's layer stores the bytes once, COPY --from reads them


def diff(venv: str, manifest: str, out: str, new_manifest: str | None) -> int:
    with open(manifest) as fh:
        before = json.load(fh)
    now = walk(venv)
    if new_manifest:
        with open(new_manifest, "w") as fh:
            json.dump(now, fh)
    removed = sorted(set(before) - set(now))
    if removed:
        print(
            f"the install removed {len(removed)} files that were there before, e.g.:",
            *removed[:10],
            sep="\n  ",
        )
        return 1
    changed = [p for p, state in now.items() if before.get(p) != state]
    for path in changed:
        copy_out(path, out)
    os.makedirs(out, exist_ok=True)
    print(f"{len(changed)} files added or changed on top of the {len(before)} before")
    return 0


def _size(path: str) -> int:
    return sum(os.lstat(os.path.join(f, n)).st_size for f, _, names in os.walk(path) for n in names)


def slim(venv: str, paths: list[str]) -> int:
    freed = 0
    for site in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")):
        for rel in paths:
            path = os.path.join(site, rel)
            if not os.path.isdir(path) or os.path.islink(path):
                print(f"slim: {rel} is not a folder under {site}")
                return 1
            freed += _size(path)
            shutil.rmtree(path)
        for folder, dirs, _ in os.walk(site):
            for name in [d for d in dirs if d == "tests" and not os.path.islink(os.path.join(folder, d))]:
                freed += _size(os.path.join(folder, name))
                shutil.rmtree(os.path.join(folder, name))
                dirs.remove(name)
    print(f"dropped {freed / 2**20:.0f} MiB: packaged test suites" + "".join(f", {p}" for p in paths))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "slim":
        return slim(argv[1], argv[2:])
    if len(argv) == 3 and argv[0] == "snapshot":
        with open(argv[2], "w") as fh:
            json.dump(walk(argv[1]), fh)
        return 0
    if len(argv) in (4, 5) and argv[0] == "diff":
        return diff(argv[1], argv[2], argv[3], argv[4] if len(argv) == 5 else None)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
