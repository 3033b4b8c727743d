"""extract_data: an archive from the network unpacks only inside its folder, with the data filter
where Python has it (3.11.4+) and with our own member checks where it does not (Debian's 3.11.2)."""

from __future__ import annotations

import io
import tarfile

import pytest

from treegrpo.safetar import extract_data


@pytest.fixture(params=["builtin filter", "pre-3.11.4 check"])
def mode(request, monkeypatch):
    if request.param == "pre-3.11.4 check":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile data filter")  # the other parameter covers it
    return request.param


def archive(tmp_path, *members: tarfile.TarInfo, data: bytes = b"x"):
    path = tmp_path / "in.tar"
    with tarfile.open(path, "w") as tar:
        for info in members:
            if info.isfile():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def member(name: str, kind=tarfile.REGTYPE, mode: int = 0o644, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info


def test_files_and_folders_unpack_inside_the_destination_without_set_id_bits(tmp_path, mode):
    path = archive(tmp_path, member("v1", tarfile.DIRTYPE, 0o755), member("v1/adapter.bin", mode=0o4755))
    extract_data(path, tmp_path / "out")
    out = tmp_path / "out" / "v1" / "adapter.bin"
    assert out.read_bytes() == b"x" and not out.stat().st_mode & 0o4000


@pytest.mark.parametrize(
    "evil",
    [
        member("../escaped.txt"),
        member("link", tarfile.SYMTYPE, link="/etc/passwd"),
        member("dev", tarfile.CHRTYPE),
    ],
    ids=["parent", "symlink-out", "device"],
)
def test_members_reaching_outside_or_that_are_not_plain_files_refuse_the_archive(tmp_path, mode, evil):
    path = archive(tmp_path, member("ok.txt"), evil)
    with pytest.raises(tarfile.TarError):
        extract_data(path, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "out" / "link").is_symlink()


def test_an_absolute_name_never_lands_at_its_absolute_path(tmp_path, mode):
    target = tmp_path / "absolute-escape.txt"  # the builtin filter strips the "/", our check refuses
    path = archive(tmp_path, member(str(target)))
    try:
        extract_data(path, tmp_path / "out")
    except tarfile.TarError:
        pass
    assert not target.exists()
