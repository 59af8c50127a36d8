"""Fetching a Tatoeba pair file from its public source, for a student who has internet once.

``npformer data tatoeba`` (``download_pairs``) downloads ``<pair>.zip`` from manythings.org/anki
(the Tatoeba Project's sentence pairs, CC-BY 2.0 FR), unpacks ``<lang>.txt`` (and ``_about.txt``,
its licence) into ``data/<pair>/`` of the current folder, the student's own, and checks that it is
a usable pairs file (``tatoeba.load_pairs``). The lessons that train on real data read it from
there (``local_pairs_file``), or from ``$NPFORMER_FRA_ENG`` when the student keeps it elsewhere.

Nothing is half-written: the archive goes to a temporary file beside the target, the pairs file is
unpacked to another and checked, and each is renamed into place only when complete and usable, so
an interrupted or bad download leaves the folder as it was (a ``data/<pair>/`` folder it had to make
is removed again). The files are written with the user's usual mode (``0666`` less the umask). A
usable file already there is kept (``force`` replaces it).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path

from .files import DataError
from .tatoeba import LoadReport, load_pairs

SOURCE = "https://www.manythings.org/anki/{pair}.zip"
DEFAULT_FOLDER = "data"   # relative to the current folder: the student's own
PAIR = re.compile(r"^[a-z]{3}-eng$")
# manythings.org refuses the default User-Agent of Python's urllib
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) npformer (course data download)"


def pairs_file_name(pair: str) -> str:
    """``fra-eng`` -> ``fra.txt``, the name of the pairs file inside manythings' archive."""
    return f"{pair.split('-')[0]}.txt"


def local_pairs_file(pair: str = "fra-eng", folder: str | Path = DEFAULT_FOLDER) -> Path:
    """Where ``npformer data tatoeba --pair PAIR`` puts the file: ``data/<pair>/<lang>.txt``, relative
    to the current folder."""
    return Path(folder) / pair / pairs_file_name(pair)


def find_pairs_file(pair: str = "fra-eng", variable: str = "NPFORMER_FRA_ENG") -> str | None:
    """The pairs file a lesson trains on: ``$NPFORMER_FRA_ENG`` when it names a file (the student keeps it
    elsewhere), else ``data/<pair>/<lang>.txt`` of the current folder (where ``npformer data tatoeba``
    puts it), else None. Nothing outside the student's folder is looked at unless they say so."""
    explicit = os.environ.get(variable)
    if explicit:
        if os.path.isfile(explicit):
            return explicit
        print(f"{variable} is set to {explicit!r}, which is not a file")
    local = local_pairs_file(pair)
    return str(local) if local.is_file() else None


def check_pair(pair: str) -> None:
    if not PAIR.match(pair):
        raise DataError(f"--pair {pair!r} is not one of manythings.org's names (three letters, "
                        "a dash, eng: fra-eng, deu-eng, spa-eng)")


def _fetch(url: str, target: Path, progress: bool) -> None:
    """Download ``url`` to ``target`` (a temporary name), with a progress bar when the size is known.
    The network and progress modules are imported here, when a download starts: ``import npformer``
    does not pay for them."""
    import urllib.error
    import urllib.request

    from tqdm.auto import tqdm

    try:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        with urllib.request.urlopen(request, timeout=60) as response, target.open("wb") as out:
            size = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=size, unit="B", unit_scale=True, desc=url.rsplit("/", 1)[-1], disable=not progress) as bar:
                while chunk := response.read(1 << 16):
                    out.write(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as error:
        raise DataError(f"{url} answered {error.code} {error.reason}: check the pair's name, or "
                        "download the zip in a browser and pass --url file:///path/to/it.zip") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise DataError(f"could not download {url} ({reason}): this needs internet once; or "
                        "download the zip elsewhere and pass --url file:///path/to/it.zip") from None


def _umask() -> int:
    """The user's file-creation mask (read by setting it, then set back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _unpack(archive: Path, name: str, folder: Path, url: str) -> LoadReport:
    """``name`` (and ``_about.txt``) from the archive into ``folder``: each written whole to a temporary
    name beside its target, the pairs file checked (``load_pairs``), then both renamed into place; on
    any failure, or an interruption, the temporary files are removed and the folder is as it was."""
    partials: dict[str, Path] = {}
    try:
        try:
            with zipfile.ZipFile(archive) as opened:
                members = {Path(info.filename).name: info for info in opened.infolist()
                           if not info.filename.startswith("__MACOSX/") and not info.is_dir()}
                if name not in members:
                    raise DataError(f"{url} holds no {name} (it holds {', '.join(sorted(members)) or 'nothing'})")
                for member in (name, "_about.txt"):
                    if member in members:
                        handle, partial = tempfile.mkstemp(prefix=f".{member}.", dir=folder)
                        partials[member] = Path(partial)
                        with os.fdopen(handle, "wb") as out, opened.open(members[member]) as source:
                            shutil.copyfileobj(source, out, 1 << 16)
        except (zipfile.BadZipFile, zlib.error, EOFError):
            raise DataError(f"{url} is not a zip archive, or a damaged one (manythings.org serves <pair>.zip)") from None
        try:
            _, report = load_pairs(str(partials[name]), max_words=None)
        except DataError as error:
            raise DataError(str(error).replace(str(partials[name]), f"{name} of {url}")) from None
        report.path = str(folder / name)
        mode = 0o666 & ~_umask()                  # a temporary file is private (0600); a data file is not
        for member, partial in list(partials.items()):
            os.chmod(partial, mode)
            os.replace(partial, folder / member)
            del partials[member]
        return report
    finally:
        for partial in partials.values():
            partial.unlink(missing_ok=True)


def download_pairs(pair: str = "fra-eng", folder: str | Path = DEFAULT_FOLDER, *, url: str | None = None,
                   force: bool = False, progress: bool = True) -> tuple[Path, LoadReport, str]:
    """Fetch and unpack one Tatoeba pair; returns (the pairs file, what ``load_pairs`` read of it, what
    was done: ``"already here"``, ``"downloaded"``, ``"downloaded again"`` (``force``) or ``"downloaded
    over an unusable file"``). A usable file already there is kept unless ``force``. A ``DataError``
    says in one line what went wrong, and leaves the file that was there."""
    check_pair(pair)
    target = local_pairs_file(pair, folder)
    done = "downloaded"
    if target.is_file():
        try:
            _, report = load_pairs(str(target), max_words=None)
        except DataError:
            done = "downloaded over an unusable file"
        else:
            if not force:
                return target, report, "already here"
            done = "downloaded again"
    url = url or SOURCE.format(pair=pair)
    if "://" not in url and Path(url).is_file():  # a zip already here, given as a plain path
        url = Path(url).resolve().as_uri()
    created = [folder for folder in (target.parent, *target.parent.parents) if not folder.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, archive = tempfile.mkstemp(prefix=f".{pair}.", suffix=".zip", dir=target.parent)
    os.close(handle)
    try:
        _fetch(url, Path(archive), progress)
        report = _unpack(Path(archive), target.name, target.parent, url)
    except BaseException:
        Path(archive).unlink(missing_ok=True)   # before its folder can be removed (the finally finds it gone)
        for made in created:            # the folders this download made, innermost first, if left empty
            if made.is_dir() and not any(made.iterdir()):
                made.rmdir()
        raise
    finally:
        Path(archive).unlink(missing_ok=True)
    return target, report, done
