"""remove_tree removes whatever a student's code can leave behind, and never raises for one entry.

The trees are built the way a hostile notebook would build them: thousands of folders deep
(paths far longer than PATH_MAX), links to files and folders that must stay, names with
newlines and bytes that are not UTF-8, sockets, fifos, folders without read, write or search
permission. Permissions mean little to root, so when the tests run as root, the tree is
removed by a child process without the capabilities that override them (setpriv).
"""

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from plmcourse.autograde import cleanup

NOBODY = 65534
DEPTH = 5000
# What lets root read, write, search and chmod whatever it likes: dropped for the remover.
OVERRIDES = "--bounding-set=-dac_override,-dac_read_search,-fowner,-chown"
REMOVE = ("import json, sys; from plmcourse.autograde.cleanup import remove_tree;"
          "print(json.dumps(remove_tree(sys.argv[1])))")


def make_deep(root: Path, depth: int, name: str = "d") -> None:
    """`depth` nested folders under `root`, made one at a time relative to the last (no long paths)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
            f.write("the bottom")
    finally:
        os.close(fd)


def plant(root: Path, keep: Path) -> None:
    """Everything odd a kernel can write, with links to `keep` (outside the tree, to stay)."""
    make_deep(root, DEPTH)
    (root / "line\nbreak").mkdir()
    (root / "line\nbreak" / "tab\there.txt").write_text("x")
    os.mkdir(os.fsencode(root) + b"/not-utf8-\xff\xfe")
    with open(os.fsencode(root) + b"/not-utf8-\xff\xfe/file-\x80", "w") as f:
        f.write("x")
    (root / "link-to-file").symlink_to(keep / "precious.txt")
    (root / "link-to-folder").symlink_to(keep)
    (root / "dangling").symlink_to(root / "nothing-here")
    os.mkfifo(root / "fifo")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    os.chdir(root)  # a socket's path is limited to 107 bytes: bind it by a short relative name
    try:
        server.bind("sock")
    finally:
        os.chdir(cwd)
        server.close()
    (root / "wide").mkdir()
    for i in range(300):
        (root / "wide" / f"f{i}").write_text("x")
    locked = {"no-write": 0o500, "no-search": 0o600, "nothing": 0o000}
    for name, mode in locked.items():
        (root / name / "inner").mkdir(parents=True)
        (root / name / "inner" / "file").write_text("x")
        os.chmod(root / name / "inner", mode)
        os.chmod(root / name, mode)
    os.link(keep / "precious.txt", root / "hard-link")


@pytest.fixture
def scratch():
    """A folder under the temporary directory that `nobody` can reach (pytest's tmp_path is root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="plmcourse-cleanup-test-"))
    os.chmod(folder, 0o755)
    yield folder
    subprocess.run(["chmod", "-R", "u+rwx", str(folder)], capture_output=True)
    subprocess.run(["rm", "-rf", str(folder)], capture_output=True)


def give_away(root: Path, uid: int) -> None:
    """chown -R without following links (coreutils walks a deep tree without recursing)."""
    subprocess.run(["chown", "-R", "-P", "-h", f"{uid}:{uid}", str(root)], check=True)


def remove_as_owner(tree: Path) -> list[str]:
    """remove_tree(tree) in a child process that permissions apply to (root without its overrides)."""
    cmd = [sys.executable, "-c", REMOVE, str(tree)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions cannot be made to apply")
        cmd = ["setpriv", "--inh-caps=-all", OVERRIDES, *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_hostile_tree_is_removed_and_what_its_links_point_to_stays(scratch):
    keep = scratch / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("stays")
    tree = scratch / "tree"
    tree.mkdir()
    os.chmod(keep, 0o755)
    plant(tree, keep)
    os.chmod(keep / "precious.txt", 0o644)

    assert remove_as_owner(tree) == []

    assert not os.path.lexists(tree)
    assert (keep / "precious.txt").read_text() == "stays"
    assert sorted(p.name for p in keep.iterdir()) == ["precious.txt"]


def test_the_deep_tree_is_deeper_than_path_max_and_recursion(scratch):
    tree = scratch / "tree"
    tree.mkdir()
    make_deep(tree, DEPTH)
    assert DEPTH * 2 > os.pathconf("/", "PC_PATH_MAX") and DEPTH > sys.getrecursionlimit()
    assert cleanup.remove_tree(tree) == []
    assert not os.path.lexists(tree)


def test_what_cannot_be_removed_is_reported_and_the_rest_goes(scratch):
    if os.geteuid() != 0:
        pytest.skip("needs a folder another user owns: run as root")
    tree = scratch / "tree"
    tree.mkdir()
    (tree / "mine").mkdir()
    (tree / "mine" / "a.txt").write_text("x")
    (tree / "theirs").mkdir()
    (tree / "theirs" / "their\nfile").write_text("x")
    (tree / "zz.txt").write_text("x")
    give_away(tree / "theirs", NOBODY)  # another user's folder: it can be neither emptied nor chmodded
    os.chmod(tree / "theirs", 0o755)

    lines = remove_as_owner(tree)
    assert any("theirs/their\\nfile: Permission denied" in line for line in lines), lines
    assert all("\n" not in line for line in lines)
    assert sorted(p.name for p in tree.iterdir()) == ["theirs"]  # everything else went


def test_a_link_or_a_file_given_as_the_tree_is_removed_alone(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "f").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert cleanup.remove_tree(link) == []
    assert not os.path.lexists(link) and (target / "f").exists()
    assert cleanup.remove_tree(target / "f") == [] and not (target / "f").exists()
    assert cleanup.remove_tree(tmp_path / "nothing") == []


def test_the_scratch_folder_goes_however_the_block_ends():
    with pytest.raises(RuntimeError):
        with cleanup.scratch_folder("plmcourse-cleanup-test-") as folder:
            make_deep(folder, 50)
            os.chmod(folder, 0o500)
            raise RuntimeError("grading failed")
    assert not os.path.lexists(folder)
    assert stat.S_ISDIR(os.stat(tempfile.gettempdir()).st_mode)
