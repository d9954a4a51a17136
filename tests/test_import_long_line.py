"""page_db_import and a line of 50 MB: the line is never held in memory
whole; the import stops at once naming its line (exit status 1), or skips
it with ``--skip-malformed`` and keeps counting lines right."""

import os
import subprocess
import sys
import threading

BIN = os.path.dirname(sys.executable)
LONG = 50 * 1024**2


def write_input(path, long_at, long_len):
    """Link lines with one line of ``long_len`` bytes (no tab) at line
    ``long_at``, and a refused URL two lines after it."""
    with open(path, "wb") as f:
        for k in range(1, long_at + 4):
            if k == long_at:
                f.write(b"http://a.test/" + b"x" * (long_len - 14) + b"\n")
            elif k == long_at + 2:
                f.write(b"http://a.test/\tmailto:someone@example.com\n")
            else:
                f.write(f"http://a.test/{k}\thttp://b.test/{k}\n".encode())
    return str(path)


def rss_of(*args):
    """Exit status, stderr and peak RSS (MiB, measured with wait4) of a
    page_db_import run; a run that hangs is killed after 120 s."""
    p = subprocess.Popen([os.path.join(BIN, "page_db_import"), *map(str, args), "-q"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    watchdog = threading.Timer(120, p.kill)
    watchdog.start()
    _, status, usage = os.wait4(p.pid, 0)
    watchdog.cancel()
    err = p.stderr.read().decode()
    p.stderr.close()
    return os.waitstatus_to_exitcode(status), err, usage.ru_maxrss / 1024


def test_a_50_mb_line_stops_the_import_at_once_with_its_line_number(tmp_path):
    edges = write_input(tmp_path / "edges.tsv", long_at=4, long_len=LONG)
    # The baseline: the same tool stopping at a short malformed line.
    small = write_input(tmp_path / "small.tsv", long_at=4, long_len=100)
    code, err, base_rss = rss_of(tmp_path / "db0", small, "--chunk-bytes", 1 << 20)
    assert code == 1 and "small.tsv:4: expected SRC_URL<TAB>DST_URL" in err, err
    # The default limit (1 MiB).
    code, err, rss = rss_of(tmp_path / "db", edges, "--chunk-bytes", 1 << 20)
    assert code == 1, err
    assert "edges.tsv:4: line longer than 1,048,576 bytes: b'http://a.test/xxx" in err, err
    assert rss < base_rss + 32, (rss, base_rss)  # 50 MB never read in whole
    # The lines before it are imported.
    out = subprocess.run([os.path.join(BIN, "page_db_stats"), str(tmp_path / "db")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "links      3\n" in out.stdout, out.stdout


def test_skip_malformed_skips_the_long_line_and_keeps_line_numbers(tmp_path):
    rss = {}
    for long_len, chunk in ((LONG, 1 << 20), (200_000, 1 << 20)):  # across chunks, and inside one chunk
        edges = write_input(tmp_path / f"e{long_len}.tsv", long_at=4, long_len=long_len)
        code, err, rss[long_len] = rss_of(tmp_path / f"db{long_len}", edges, "--chunk-bytes", chunk,
                                          "--max-line-bytes", 65536, "--skip-malformed")
        assert code == 0, err
        assert ":4: skipped (malformed line): line longer than 65,536 bytes" in err, err
        assert f"e{long_len}.tsv:6: skipped (scheme): mailto:" in err, err  # counted right after it
        assert "6 links read" in err and "5 links\n" in err, err
    assert rss[LONG] < rss[200_000] + 32, rss  # the 50 MB line streams past, never held whole
