"""deploy/docker/venv_delta.py, which splits the images' virtual environment into shared layers:
what an install added is found by content (not mtime), linked out, and a removal fails the build."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("venv_delta", ROOT / "deploy/docker/venv_delta.py")
venv_delta = importlib.util.module_from_spec(spec)
spec.loader.exec_module(venv_delta)


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_only_new_and_changed_files_are_linked_out_whatever_their_mtime(tmp_path):
    venv = tmp_path / "venv"
    tree(venv, {"lib/core.py": "core", "lib/same.py": "same", "bin/python": "#!"})
    os.symlink("python", venv / "bin" / "python3")
    assert venv_delta.main(["snapshot", str(venv), str(tmp_path / "m")]) == 0
    os.utime(venv / "lib/same.py", (1, 1))  # a layer boundary changes mtimes, not contents
    tree(venv, {"lib/core.py": "core v2", "lib/service/new.py": "new"})
    out = tmp_path / "delta"
    assert venv_delta.main(["diff", str(venv), str(tmp_path / "m"), str(out), str(tmp_path / "m2")]) == 0
    found = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert found == [str(venv / "lib/core.py")[1:], str(venv / "lib/service/new.py")[1:]]
    assert (
        os.stat(out / str(venv / "lib/service/new.py")[1:]).st_ino
        == os.stat(venv / "lib/service/new.py").st_ino
    )
    assert venv_delta.main(["diff", str(venv), str(tmp_path / "m2"), str(tmp_path / "d2")]) == 0
    assert not [
        p for p in (tmp_path / "d2").rglob("*") if p.is_file()
    ]  # nothing new since the second snapshot


def test_an_install_that_removes_a_file_of_the_layer_below_fails(tmp_path, capsys):
    venv = tmp_path / "venv"
    tree(venv, {"lib/numpy/__init__.py": "1.0", "lib/other.py": "x"})
    venv_delta.main(["snapshot", str(venv), str(tmp_path / "m")])
    (venv / "lib/numpy/__init__.py").unlink()  # pip replacing a dependency with another version
    assert venv_delta.main(["diff", str(venv), str(tmp_path / "m"), str(tmp_path / "d")]) == 1
    assert "lib/numpy/__init__.py" in capsys.readouterr().out


def test_slim_drops_packaged_test_suites_only(tmp_path):
    site = tmp_path / "venv/lib/python3.11/site-packages"
    tree(site, {"pandas/tests/test_x.py": "t", "pandas/core.py": "c", "numpy/testing/util.py": "u"})
    assert venv_delta.main(["slim", str(tmp_path / "venv")]) == 0
    assert not (site / "pandas/tests").exists()
    assert (site / "pandas/core.py").exists() and (site / "numpy/testing/util.py").exists()


def test_slim_drops_the_named_folders_and_fails_on_one_that_is_not_there(tmp_path, capsys):
    site = tmp_path / "venv/lib/python3.11/site-packages"
    tree(site, {"kubernetes/aio/api.py": "a", "kubernetes/client/api.py": "c"})
    assert venv_delta.main(["slim", str(tmp_path / "venv"), "kubernetes/aio"]) == 0
    assert not (site / "kubernetes/aio").exists() and (site / "kubernetes/client/api.py").exists()
    assert venv_delta.main(["slim", str(tmp_path / "venv"), "kubernetes/aio"]) == 1  # gone: say so
    assert "kubernetes/aio is not a folder" in capsys.readouterr().out
