"""A local-directory object store: the embedded default, and the reference for the S3 backend.

Every write goes to a temp file under `<root>/.tmp/` and is then renamed into place, so readers
never see a half-written object. `put_if_absent` uses link(2), which fails atomically if the
target exists. Objects are never modified in place.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator, MutableSequence, Sequence
from pathlib import Path

from .base import ObjectInfo, ObjectNotFoundError, ObjectStore, StoreError
from .digests import Digests

_TMP = ".tmp"
_CHUNK = 1024 * 1024


def _holds_a_file(path: str) -> bool:
    """Whether a file is anywhere below `path`: depth first, reading folders lazily (a folder of many
    subfolders is not read whole when its first one holds a file)."""
    try:
        with os.scandir(path) as entries:
            for e in entries:
                if not e.is_dir(follow_symlinks=False) or _holds_a_file(e.path):
                    return True
    except (FileNotFoundError, NotADirectoryError):
        pass
    return False


_NAMES_HELD = 16_384  # names of one folder a listing holds at a time (about 4 MiB)


def _sorted_names(folder: Path, held: int | None = None) -> Iterator[tuple[str, str, bool]]:
    """(sort key, name, is a folder) of `folder`'s entries in key order, `held` at a time: each
    chunk is the smallest names after the previous chunk's last, from one more read of the folder."""
    held = _NAMES_HELD if held is None else held
    last: str | None = None
    while True:
        try:
            with os.scandir(folder) as entries:
                chunk = heapq.nsmallest(held, (e for e in (_named(x) for x in entries)
                                               if last is None or e[0] > last))
        except (FileNotFoundError, NotADirectoryError):
            return
        yield from chunk
        if len(chunk) < held:
            return
        last = chunk[-1][0]
        del chunk  # before the next read: one chunk held at a time


def _named(entry: os.DirEntry[str]) -> tuple[str, str, bool]:
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
    except OSError:
        is_dir = False
    return (f"{entry.name}/" if is_dir else entry.name), entry.name, is_dir


class DirectoryStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True):
        self.root = Path(root).absolute()
        self.fsync = fsync  # off only for throwaway stores (tests on slow shared disks)
        self.url = f"file://{self.root}"

    # --- helpers ---------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] == _TMP:
            raise StoreError(f"invalid object key {key!r}")
        return self.root.joinpath(*parts)

    def _tmp_file(self) -> tuple[int, str]:
        tmp_dir = self.root / _TMP
        tmp_dir.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(dir=tmp_dir, prefix="put-")

    def _write_tmp(self, data: bytes) -> str:
        fd, tmp = self._tmp_file()
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        return tmp

    @staticmethod
    def _info(key: str, st: os.stat_result) -> ObjectInfo:
        return ObjectInfo(key=key, size=st.st_size, last_modified=st.st_mtime)

    # --- interface -------------------------------------------------------------------------
    def check(self, *, writes: bool = False) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot use directory store {self.url}: {exc.strerror}") from exc
        if not os.access(self.root, os.W_OK):
            raise StoreError(f"directory store {self.url} is not writable")

    def put_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        tmp = self._write_tmp(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, path)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ObjectNotFoundError(f"object {key!r} not found in {self.url}") from exc

    def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        tmp = self._write_tmp(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def put_file(self, key: str, path: str) -> None:
        dst = self._path(key)
        fd, tmp = self._tmp_file()
        os.close(fd)
        shutil.copyfile(path, tmp)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dst)

    def get_file(self, key: str, path: str, *, digests: Collection[str] = ()) -> dict[str, str]:
        try:
            if not digests:
                shutil.copyfile(self._path(key), path)
                return {}
            digest = Digests(digests)
            with open(self._path(key), "rb") as src, open(path, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    dst.write(chunk)
            return digest.hexdigests()
        except (FileNotFoundError, NotADirectoryError) as exc:
            if not Path(path).parent.is_dir():
                raise
            raise ObjectNotFoundError(f"object {key!r} not found in {self.url}") from exc

    def stat(self, key: str) -> ObjectInfo | None:
        try:
            return self._info(key, self._path(key).stat())
        except (FileNotFoundError, NotADirectoryError):
            return None

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        # Depth first, each folder's names in key order (a folder sorts as its name and "/", where
        # its keys start), so keys come in order without being held: a folder of more than
        # _NAMES_HELD names is read again for each further chunk of names (what a listing of a
        # year-old sink's staging folder costs in memory is a chunk, not the folder).
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        yield from self._walk(self.root / base if base else self.root, f"{base}/" if base else "", prefix)

    def _walk(self, folder: Path, rel: str, prefix: str) -> Iterator[ObjectInfo]:
        for _, name, is_dir in _sorted_names(folder):
            key = f"{rel}{name}"
            if not rel and name == _TMP:
                continue
            if is_dir:
                if (below := f"{key}/").startswith(prefix) or prefix.startswith(below):
                    yield from self._walk(folder / name, below, prefix)
            elif key.startswith(prefix):
                try:
                    yield self._info(key, os.stat(folder / name))
                except (FileNotFoundError, NotADirectoryError):
                    continue  # deleted while we walked

    def list_after(self, prefix: str, start_after: str) -> Iterator[ObjectInfo]:
        # Depth first in name order, skipping folders whose keys all sort before `start_after`, so
        # only the keys after it are held (a folder's names are still read, as readdir gives them).
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        stack = [(self.root / base if base else self.root, f"{base}/" if base else "")]
        found: list[ObjectInfo] = []
        while stack:
            folder, rel = stack.pop()
            try:
                entries = os.scandir(folder)  # an iterator: a folder of many names is never held whole
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                found.extend(self._after(entries, rel, prefix, start_after, stack))
        found.sort(key=lambda info: info.key)
        yield from found

    def _after(self, entries: Iterator[os.DirEntry[str]], rel: str, prefix: str, start_after: str,
               stack: MutableSequence[tuple[Path, str]]) -> Iterator[ObjectInfo]:
        for e in entries:
                key = f"{rel}{e.name}"
                if not rel and e.name == _TMP:
                    continue
                if e.is_dir(follow_symlinks=False):
                    below = key + "/"
                    if (below.startswith(prefix) or prefix.startswith(below)) and (
                            below > start_after or start_after.startswith(below)):
                        stack.append((Path(e.path), below))
                elif key.startswith(prefix) and key > start_after:
                    try:
                        yield self._info(key, e.stat())
                    except FileNotFoundError:
                        continue

    def list_children(self, prefix: str) -> Sequence[str]:
        if prefix and not prefix.endswith("/"):
            raise ValueError(f"list_children needs a prefix ending in '/', not {prefix!r}")
        base = self._path(prefix.rstrip("/")) if prefix else self.root
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return []
        # A directory only counts when it holds a file somewhere below (S3 has no empty folders).
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and not (not prefix and e.name == _TMP)
                      and _holds_a_file(e.path))

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(self._path(key))

    def copy(self, src: str, dst: str) -> None:
        src_path, dst_path = self._path(src), self._path(dst)
        if not src_path.is_file():
            raise ObjectNotFoundError(f"object {src!r} not found in {self.url}")
        dst_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = self._tmp_file()
        os.close(fd)
        # A real copy (not a hard link): a savepoint must not share bytes with the checkpoint
        # objects, so damage to one cannot reach the other. copyfile uses copy_file_range.
        shutil.copyfile(src_path, tmp)
        os.replace(tmp, dst_path)
