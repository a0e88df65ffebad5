"""Removing what grading leaves behind, in a way that one odd file cannot stop.

What a student's code wrote can hold anything a file system holds: a tree 5,000 folders
deep (whose paths are longer than PATH_MAX), links to places that must stay, names with
newlines or bytes that are not UTF-8, folders it made unreadable or unwritable, sockets
and fifos. `shutil.rmtree` recurses (a deep tree exhausts Python's stack), builds full
paths (too long for the kernel), and stops at the first error. `remove_tree` instead:

* never follows a link: a link is removed, what it points to stays;
* walks iteratively, holding one open folder at a time and naming everything relative
  to it, so that neither recursion, the number of open files nor PATH_MAX is reached;
* gives a folder of ours back its owner's read, write and search permission when it must
  be entered or emptied;
* never raises for one entry: it notes what it could not remove and goes on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MAX_REPORTED = 20  # lines about what could not be removed; then one line with the count
# Open a folder to read it, never through a link, and never let a child process inherit it.
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass
class _Folder:
    """A folder being emptied: its name in its parent, how reports show it, the subfolders left."""

    name: str
    identity: tuple  # (st_dev, st_ino): going back up through ".." must land here again
    subfolders: list = field(default_factory=list)


def remove_tree(path) -> list[str]:
    """Remove `path` without following links: a folder with everything in it, a file, or a link
    (only the link). Nothing at `path` is nothing to remove.

    Never raises for what is inside: returns one line per thing it could not remove (at most
    MAX_REPORTED, then a count), or [] when everything is gone.
    """
    path = os.fspath(path)
    problems = []
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return []
    except OSError as error:
        return [f"{_escaped(path)}: {error.strerror}"]
    if not stat.S_ISDIR(info.st_mode):
        _unlink(path, None, _escaped(path), problems)
        return _bounded(problems)
    fd = _open_folder(path, None, _escaped(path), problems)
    if fd is None:
        return _bounded(problems)
    try:
        _empty_tree(fd, path, problems)
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError as error:
        problems.append(f"{_escaped(path)}: {error.strerror}")
    return _bounded(problems)


def _empty_tree(fd: int, path: str, problems: list) -> None:
    """Remove everything inside the open folder `fd`, depth first, one open folder at a time.

    Going down opens a subfolder by name; going back up opens ".." and checks that it is
    the folder we came from (its device and inode), so that nothing moved underneath can
    make us delete elsewhere. `fd` is the root's descriptor and is left open for the caller.
    """
    root = os.fstat(fd)
    stack = [_Folder(path, (root.st_dev, root.st_ino), _empty_files(fd, _escaped(path), problems))]
    current = os.dup(fd)
    try:
        while stack:
            top = stack[-1]
            if top.subfolders:
                name = top.subfolders.pop()
                shown = _shown(stack, name)
                child = _open_folder(name, current, shown, problems)
                if child is None:
                    continue
                os.close(current)
                current = child
                info = os.fstat(child)
                stack.append(_Folder(name, (info.st_dev, info.st_ino), _empty_files(child, shown, problems)))
                continue
            stack.pop()
            if not stack:
                return
            parent = os.open("..", FOLDER_FLAGS, dir_fd=current)
            os.close(current)
            current = parent
            info = os.fstat(parent)
            if (info.st_dev, info.st_ino) != stack[-1].identity:
                problems.append(f"{_shown(stack, '')}: moved while it was being removed; stopped there")
                return
            try:
                os.rmdir(top.name, dir_fd=current)
            except OSError as error:
                problems.append(f"{_shown(stack, top.name)}: {error.strerror}")
    finally:
        os.close(current)


def _empty_files(fd: int, shown: str, problems: list) -> list[str]:
    """Unlink every entry of the open folder that is not a folder (files, links, sockets, fifos);
    return the names of its subfolders (not links to folders), to be entered next."""
    _make_ours(fd)
    subfolders = []
    try:
        entries = list(os.scandir(fd))
    except OSError as error:
        problems.append(f"{shown}: cannot list it ({error.strerror})")
        return []
    for entry in entries:
        try:
            is_folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_folder = False
        if is_folder:
            subfolders.append(entry.name)
        else:
            _unlink(entry.name, fd, f"{shown}/{_escaped(entry.name)}", problems)
    return subfolders


def _make_ours(fd: int) -> None:
    """Give the open folder its owner's read, write and search permission (needed to list it and
    remove what is in it); a folder that is not ours keeps its mode, and removal reports why."""
    try:
        mode = os.fstat(fd).st_mode
        if mode & 0o700 != 0o700:
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    except OSError:
        pass


def _open_folder(name: str, parent_fd: int | None, shown: str, problems: list) -> int | None:
    """The folder `name` (in `parent_fd`) opened for reading, made readable first if need be; None
    (with the reason noted) when it cannot be opened."""
    try:
        return os.open(name, FOLDER_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        pass  # a folder without read or search permission: give it back to its owner, then retry
    except OSError as error:
        problems.append(f"{shown}: {error.strerror}")
        return None
    try:
        _chmod_folder(name, parent_fd)
        return os.open(name, FOLDER_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        problems.append(f"{shown}: {error.strerror}")
        return None


def _chmod_folder(name: str, parent_fd: int | None) -> None:
    try:
        os.chmod(name, 0o700, dir_fd=parent_fd, follow_symlinks=False)
    except (NotImplementedError, OSError) as error:
        if isinstance(error, OSError) and error.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        # This C library cannot chmod without following links; `name` was a folder when listed.
        os.chmod(name, 0o700, dir_fd=parent_fd)


def _unlink(name: str, fd: int | None, shown: str, problems: list) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError as error:
        problems.append(f"{shown}: {error.strerror}")


def _shown(stack: list, name: str) -> str:
    """How a report names `name` inside the innermost folder of `stack`: the root, then at most
    the last three folders (a tree thousands deep would make a line of megabytes)."""
    names = [folder.name for folder in stack[1:][-3:]] + ([name] if name else [])
    skipped = "/…" if len(stack) > 4 else ""
    return "/".join([_escaped(stack[0].name) + skipped, *map(_escaped, names)])


def _escaped(name: str) -> str:
    """A name as one printable line: a newline, a control character or a byte that is not UTF-8
    shows as its escape; a very long path keeps its beginning and its end."""
    text = name.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= 300 else f"{text[:120]}…{text[-160:]}"


def _bounded(problems: list) -> list[str]:
    if len(problems) <= MAX_REPORTED:
        return problems
    return problems[:MAX_REPORTED] + [f"... and {len(problems) - MAX_REPORTED} more"]


@contextlib.contextmanager
def scratch_folder(prefix: str):
    """A new private folder in the temporary directory, removed with remove_tree however the
    block ends; what could not be removed is said on stderr, one line each."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        for line in remove_tree(folder):
            print(f"cleanup: could not remove {line}", file=sys.stderr)
