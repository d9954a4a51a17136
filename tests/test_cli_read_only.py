"""The tools, as installed, on a page database they cannot write: on a
read-only file system (a read-only bind mount in a mount namespace of the
tool's own, as root) or, when not root, in a directory without write
permission. A tool that must write says so in one line naming the path and
the cause, exit status 2; the read-only tools work."""

import os
import subprocess
import sys

import pytest

BIN = os.path.dirname(sys.executable)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
CAUSES = ("Read-only file system", "Permission denied")


def read_only(directory, cmd):
    """``cmd`` run with ``directory`` read-only to it."""
    if os.geteuid() != 0:
        return cmd  # the caller took write permission away
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", directory, *cmd]


@pytest.fixture
def ro(tmp_path):
    """A directory holding a page database (``db``) and an empty
    directory, read-only to the commands run through the returned function."""
    top = tmp_path / "ro"
    top.mkdir()
    edges = tmp_path / "edges.tsv"
    edges.write_text("http://a.test/\thttp://b.test/\nhttp://b.test/\thttp://a.test/x\n")
    subprocess.run([os.path.join(BIN, "page_db_import"), str(top / "db"), str(edges), "-q"], check=True)
    (top / "empty").mkdir()
    if os.geteuid() != 0:
        for d in (top, top / "db", top / "empty"):
            d.chmod(0o555)

    def run(*argv):
        cmd = read_only(str(top), [os.path.join(BIN, argv[0]), *argv[1:]])
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))

    # the directory is read-only to those commands
    probe = run("python", "-c", f"open({str(top / 'probe')!r}, 'w')")
    assert probe.returncode != 0 and any(c in probe.stderr for c in CAUSES), probe.stderr
    yield top, edges, run
    if os.geteuid() != 0:
        for d in (top, top / "db", top / "empty"):
            d.chmod(0o755)


def one_error_line(out, prog, path):
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"{prog}: error: {path}") and any(c in lines[0] for c in CAUSES), lines[0]


def test_writers_on_a_read_only_file_system_say_so_in_one_line(ro):
    top, edges, run = ro
    db = str(top / "db")
    one_error_line(run("page_db_import", db, str(edges)), "page_db_import", db)
    one_error_line(run("page_db_rank", db), "page_db_rank", db)
    one_error_line(run("frontera-linkrank", "import", db, str(edges)), "frontera-linkrank import", db)
    one_error_line(run("frontera-linkrank", "rank", db), "frontera-linkrank rank", db)
    new = str(top / "empty" / "new")
    one_error_line(run("page_db_import", new, str(edges)), "page_db_import", new)
    out = str(top / "links.tsv")
    one_error_line(run("page_db_export", db, out), "page_db_export", out)
    seeds = str(top / "seeds.txt")
    one_error_line(run("page_db_seeds", db, "-k", "1", "-o", seeds), "page_db_seeds", seeds)


def test_readers_work_on_a_read_only_file_system(ro):
    top, _, run = ro
    db = str(top / "db")
    for argv in (("page_db_check", db), ("page_db_stats", db), ("page_db_dump", "info", db), ("page_db_find", db, "a")):
        out = run(*argv)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (argv, out.stderr)
    assert "http://a.test/x" in run("page_db_find", db, "a").stdout
