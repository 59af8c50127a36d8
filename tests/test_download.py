"""``npformer data tatoeba``: the download a student runs once, tested on local copies (``--url
file://...``): a small archive as manythings.org lays it out, the real English-French file of the
shared data folder zipped the same way, and every way it can go wrong, each in one line with the
folder left as it was."""

from __future__ import annotations

import os
import urllib.request
import zipfile

import pytest

from npformer.cli import main
from npformer.data.download import find_pairs_file, local_pairs_file

from conftest import shared_file

PAIRS = "".join(f"I see {n} cats.\tJe vois {n} chats.\tCC-BY 2.0 (France) Attribution: tatoeba.org #{n}\n"
                for n in range(1, 61))


def _archive(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return f"file://{path}"


@pytest.fixture
def usual_umask():
    """A usual file-creation mask (022), so that a private temporary file's 0600 shows; restored after."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def test_the_pairs_are_unpacked_into_the_students_folder_and_found_there(tmp_path, monkeypatch, capsys, usual_umask):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NPFORMER_FRA_ENG", raising=False)
    assert find_pairs_file() is None
    url = _archive(tmp_path / "fra-eng.zip", {"fra.txt": PAIRS, "_about.txt": "licence", "__MACOSX/._fra.txt": "x"})
    assert main(["data", "tatoeba", "--url", url]) == 0
    printed = capsys.readouterr().out
    assert "60 pairs kept" in printed and "downloaded: data/fra-eng/fra.txt" in printed and "CC-BY 2.0 FR" in printed
    assert (tmp_path / "data" / "fra-eng" / "fra.txt").read_text() == PAIRS
    assert sorted(path.name for path in (tmp_path / "data" / "fra-eng").iterdir()) == ["_about.txt", "fra.txt"]
    for name in ("fra.txt", "_about.txt"):                       # the user's usual mode, not a temporary 0600
        assert (tmp_path / "data" / "fra-eng" / name).stat().st_mode & 0o777 == 0o644
    assert find_pairs_file() == str(local_pairs_file())
    assert main(["data", "tatoeba", "--url", url]) == 0          # already there: kept, not downloaded again
    assert "already here" in capsys.readouterr().out


@pytest.mark.parametrize("members, words", [
    ({"deu.txt": PAIRS}, "holds no fra.txt (it holds deu.txt)"),
    (None, "is not a zip archive"),
    ("missing", "could not download"),
])
def test_a_bad_download_fails_in_one_line_and_keeps_the_file_there(members, words, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    good = _archive(tmp_path / "good.zip", {"fra.txt": PAIRS})
    assert main(["data", "tatoeba", "--url", good]) == 0
    capsys.readouterr()
    if members == "missing":
        url = f"file://{tmp_path / 'nowhere.zip'}"
    elif members is None:
        (tmp_path / "bad.zip").write_text("not an archive")
        url = f"file://{tmp_path / 'bad.zip'}"
    else:
        url = _archive(tmp_path / "bad.zip", members)
    assert main(["data", "tatoeba", "--url", url, "--force"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()   # the progress bar's lines, then the error
    [error] = [line for line in lines if line.startswith("npformer data: ")]
    assert words in error and error == lines[-1], lines
    assert (tmp_path / "data" / "fra-eng" / "fra.txt").read_text() == PAIRS
    assert sorted(path.name for path in (tmp_path / "data" / "fra-eng").iterdir()) == ["fra.txt"]


def test_a_first_download_that_fails_leaves_no_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.zip").write_text("not an archive")
    assert main(["data", "tatoeba", "--url", f"file://{tmp_path / 'bad.zip'}"]) == 2
    assert "is not a zip archive" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.zip"]


def test_a_pair_name_that_manythings_does_not_use_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "tatoeba", "--pair", "french"]) == 2
    assert "three letters, a dash, eng" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_the_real_file_zipped_as_manythings_serves_it(tmp_path, monkeypatch, capsys):
    real = shared_file("data", "fra-eng", "fra.txt")
    url = _archive(tmp_path / "fra-eng.zip", {"fra.txt": real.read_text(encoding="utf-8")})
    monkeypatch.chdir(tmp_path)
    assert main(["data", "tatoeba", "--url", url]) == 0
    assert "167,130 lines" in capsys.readouterr().out
    assert (tmp_path / "data" / "fra-eng" / "fra.txt").read_bytes() == real.read_bytes()


def test_a_zip_already_here_is_taken_as_a_plain_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _archive(tmp_path / "fra-eng.zip", {"fra.txt": PAIRS})
    assert main(["data", "tatoeba", "--url", "fra-eng.zip"]) == 0
    assert "60 pairs kept" in capsys.readouterr().out


def test_a_usable_file_is_kept_and_an_unusable_one_replaced(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    url = _archive(tmp_path / "fra-eng.zip", {"fra.txt": PAIRS})
    (tmp_path / "data" / "fra-eng").mkdir(parents=True)
    (tmp_path / "data" / "fra-eng" / "fra.txt").write_text("no tab on this line\n")
    assert main(["data", "tatoeba", "--url", url]) == 0
    assert "downloaded over an unusable file: data/fra-eng/fra.txt" in capsys.readouterr().out
    assert main(["data", "tatoeba", "--url", url, "--force"]) == 0
    assert "downloaded again: data/fra-eng/fra.txt" in capsys.readouterr().out
    assert (tmp_path / "data" / "fra-eng" / "fra.txt").read_text() == PAIRS


def test_an_archive_whose_pairs_are_unusable_leaves_the_good_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "tatoeba", "--url", _archive(tmp_path / "good.zip", {"fra.txt": PAIRS})]) == 0
    capsys.readouterr()
    bad = _archive(tmp_path / "bad.zip", {"fra.txt": "no tab on any line\n" * 5})
    assert main(["data", "tatoeba", "--url", bad, "--force"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("npformer data: ") and f"fra.txt of {bad}" in error, error
    assert (tmp_path / "data" / "fra-eng" / "fra.txt").read_text() == PAIRS
    assert sorted(path.name for path in (tmp_path / "data" / "fra-eng").iterdir()) == ["fra.txt"]


class _Interrupted:
    """A download that stops half-way, as Ctrl-C stops it: one chunk, then KeyboardInterrupt."""

    def __init__(self):
        self.headers = {"Content-Length": "1000000"}
        self.chunks = [b"PK\x03\x04" + b"x" * 1000]

    def read(self, size):
        if self.chunks:
            return self.chunks.pop()
        raise KeyboardInterrupt

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_an_interrupted_download_or_unpacking_leaves_no_file_behind(tmp_path, monkeypatch):
    from npformer.data import download

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(urllib.request, "urlopen", lambda request, timeout: _Interrupted())
    with pytest.raises(KeyboardInterrupt):
        download.download_pairs(url="https://www.manythings.org/anki/fra-eng.zip", progress=False)
    assert not (tmp_path / "data").exists()          # the folders it made are gone again
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)

    def copy_half(source, out, length):
        out.write(source.read(100))
        raise KeyboardInterrupt

    monkeypatch.setattr(download.shutil, "copyfileobj", copy_half)
    with pytest.raises(KeyboardInterrupt):
        download.download_pairs(url=_archive(tmp_path / "fra-eng.zip", {"fra.txt": PAIRS}), progress=False)
    assert not (tmp_path / "data").exists()
    (tmp_path / "data").mkdir()                       # a folder that was there stays
    with pytest.raises(KeyboardInterrupt):
        download.download_pairs(url=_archive(tmp_path / "fra-eng.zip", {"fra.txt": PAIRS}), progress=False)
    assert list((tmp_path / "data").iterdir()) == []
