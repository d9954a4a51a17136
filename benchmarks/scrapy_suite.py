"""Scrapy's own test suite as the judge of the Scrapy scheduler.

Downloads the source distribution of the *installed* Scrapy (its
``tests/`` directory has the crawl and engine tests with their mock
server), and runs its crawl-running test modules twice: with Scrapy's own
scheduler, then with ``frontera_linkrank.scrapy.LinkRankScheduler`` as the
default ``SCHEDULER`` (the tests that name a scheduler of their own keep
it). Each test runs in its own empty folder, under Scrapy's own pytest
configuration (``-W error`` as its ``filterwarnings`` set it, the asyncio
reactor). Prints, per module, how many tests pass with Scrapy's scheduler
and how many of those pass with ours, then every test that passes with
Scrapy's scheduler and not with ours.

A module *crawls* when at least one of its tests opens a scheduler (the
engine opens a spider) in the run with Scrapy's scheduler; the candidates
are the modules listed in :data:`CANDIDATES` (``--modules`` to choose).

Scrapy's test dependencies (pytest-twisted, testfixtures...) are installed
from PyPI into a venv of their own in the work folder, which sees this
environment's packages (so this project and the installed Scrapy) through
a ``.pth`` file; this environment is not changed.

    python benchmarks/scrapy_suite.py                       # everything (10-20 minutes)
    python benchmarks/scrapy_suite.py --modules test_crawl test_engine
    python benchmarks/scrapy_suite.py --ours-only --modules test_engine_loop   # against the last full run
"""

import argparse
import collections
import importlib.metadata
import os
import site
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OURS = "frontera_linkrank.scrapy.LinkRankScheduler"
# Scrapy's test requirements (its tox.ini) that its crawl tests import.
TEST_DEPS = ["pytest-twisted>=1.14.3", "testfixtures", "pexpect>=4.8.0", "psutil", "pyftpdlib>=2.0.1", "sybil>=1.3.0",
             "attrs", "pygments", "pytest-timeout"]
# Modules named by the judge's brief first, then the other in-process
# modules that may run a crawl (subprocess-based ones, such as
# test_command_crawl, cannot take another default scheduler).
REQUIRED = ["test_crawl", "test_engine", "test_feedexport", "test_engine_loop", "test_request_attribute_binding",
            "test_request_left", "test_downloaderslotssettings", "test_core_scraper", "test_contracts",
            "test_scheduler", "test_scheduler_base"]
CANDIDATES = REQUIRED + [
    "test_addons", "test_closespider", "test_crawler", "test_crawler_runners", "test_core_downloader",
    "test_downloadermiddleware", "test_downloadermiddleware_offsite", "test_downloadermiddleware_redirect",
    "test_downloadermiddleware_retry", "test_downloadermiddleware_stats", "test_dupefilters",
    "test_engine_close_spider", "test_engine_download", "test_engine_stop_download_bytes",
    "test_engine_stop_download_headers", "test_extension_periodic_log", "test_extension_throttle",
    "test_feedexport_batch", "test_logformatter", "test_logstats", "test_pipeline_crawl", "test_pipeline_media",
    "test_pipelines", "test_pqueues", "test_request_cb_kwargs", "test_signals", "test_spider", "test_spider_crawl",
    "test_spider_start", "test_spidermiddleware", "test_spidermiddleware_depth", "test_spidermiddleware_httperror",
    "test_spidermiddleware_output_chain", "test_spidermiddleware_process_start", "test_spidermiddleware_referer",
    "test_spidermiddleware_start", "test_spidermiddleware_urllength", "test_spiderstate", "test_stats",
    "test_utils_log",
]


def run(cmd, **kw):
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def prepare(workdir, version):
    """The source tree of Scrapy ``version`` and a venv with its test
    dependencies, in ``workdir``; returns (source dir, python)."""
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, f"scrapy-{version}")
    if not os.path.isdir(os.path.join(src, "tests")):
        archive = os.path.join(workdir, f"scrapy-{version}.tar.gz")
        if not os.path.exists(archive):
            run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                 f"scrapy=={version}", "-d", workdir])
        with tarfile.open(archive) as tar:
            tar.extractall(workdir, filter="data")
    venv = os.path.join(workdir, "venv")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, ".ready")):
        run([sys.executable, "-m", "venv", venv])
        purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        # This environment's packages (this project, Scrapy, ...) behind the venv's own.
        with open(os.path.join(purelib, "_parent_environment.pth"), "w") as f:
            for path in site.getsitepackages():
                f.write(f"import site; site.addsitedir({path!r})\n")
        run([python, "-m", "pip", "install", "-q", *TEST_DEPS])
        open(os.path.join(venv, ".ready"), "w").close()
    return src, python


def run_suite(src, python, modules, scheduler, out, timeout):
    """Run ``modules`` with ``scheduler`` as the default SCHEDULER (None:
    Scrapy's own); results as {nodeid: (outcome, message)} and the ids of
    the tests that opened a scheduler."""
    xml = out + ".xml"
    opened = out + ".opened"
    for path in (xml, opened):
        if os.path.exists(path):
            os.unlink(path)
    # Scrapy's mock server runs as `python -m tests.mockserver...` from the test's own folder.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((HERE, src)), SCRAPY_SUITE_OPENED=opened)
    env.pop("SCRAPY_SUITE_SCHEDULER", None)
    if scheduler:
        env["SCRAPY_SUITE_SCHEDULER"] = scheduler
    paths = [f"tests/{m}.py" if os.path.exists(os.path.join(src, "tests", m + ".py")) else f"tests/{m}"
             for m in modules]
    cmd = [python, "-m", "pytest", "-q", "-p", "scrapy_suite_plugin", "-p", "no:cacheprovider", f"--junitxml={xml}",
           f"--timeout={timeout}", "-o", "junit_family=legacy", *paths]
    print("$", " ".join(cmd), flush=True)
    t = time.monotonic()
    # A crawl's fresh page database is kept in the temporary folder when it
    # fetched pages: the suite's go in a folder of its own, removed after.
    with open(out + ".log", "w") as log, tempfile.TemporaryDirectory(prefix="tmp-", dir=os.path.dirname(out)) as tmp:
        subprocess.run(cmd, cwd=src, env=dict(env, TMPDIR=tmp), stdout=log, stderr=subprocess.STDOUT)
    print(f"  {time.monotonic() - t:.0f} s, log {out}.log", flush=True)
    crawled = set(open(opened).read().split()) if os.path.exists(opened) else set()
    return read_junit(xml), crawled


def read_junit(path):
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("file") or case.get("classname", "").replace(".", "/")
        nodeid = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = (el.get("message") or "").splitlines()[0][:160] if el.get("message") else ""
                break
        results[nodeid] = (outcome, message, module)
    return results


def module_of(nodeid):
    return nodeid.split("::")[0].split(".")[1] if nodeid.startswith("tests.") else nodeid.split("::")[0]


def opened_module(nodeid):
    """Module name of a pytest node id (``tests/test_x.py::T::t`` or ``tests/test_x/__init__.py::t``)."""
    path = nodeid.split("::")[0]
    name = os.path.basename(path)
    return os.path.basename(os.path.dirname(path)) if name == "__init__.py" else name.removesuffix(".py")


def report(theirs, ours, crawling):
    by_module = collections.defaultdict(lambda: [0, 0])
    lost = []
    for nodeid, (outcome, _, _) in theirs.items():
        module = module_of(nodeid)
        if module not in crawling or outcome != "passed":
            continue
        by_module[module][0] += 1
        mine = ours.get(nodeid, ("missing", "not run", module))
        if mine[0] == "passed":
            by_module[module][1] += 1
        else:
            lost.append((nodeid, mine[1]))
    print(f"\n{'module':45} {'Scrapy scheduler':>17} {'LinkRankScheduler':>18}")
    total = [0, 0]
    for module in sorted(by_module):
        a, b = by_module[module]
        total[0] += a
        total[1] += b
        print(f"{module:45} {a:17d} {b:18d}")
    share = total[1] / total[0] if total[0] else 0.0
    print(f"{'total (' + str(len(by_module)) + ' modules)':45} {total[0]:17d} {total[1]:18d}  ({share:.1%})")
    if lost:
        print(f"\npass with Scrapy's scheduler, not with LinkRankScheduler ({len(lost)}):")
        for nodeid, message in sorted(lost):
            print(f"  {nodeid}\n      {message}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "scrapy-suite"),
                        help="where the source, the venv and the logs go (default: build/scrapy-suite)")
    parser.add_argument("--modules", nargs="+", default=CANDIDATES, help="test modules (default: the candidates)")
    parser.add_argument("--ours-only", action="store_true",
                        help="run with LinkRankScheduler only, against the last run with Scrapy's in --workdir")
    parser.add_argument("--timeout", type=int, default=120, help="seconds a test may take (pytest-timeout)")
    args = parser.parse_args(argv)
    version = importlib.metadata.version("scrapy")
    print(f"Scrapy {version}, Python {sys.version.split()[0]}")
    src, python = prepare(args.workdir, version)
    out = os.path.join(args.workdir, "results")
    os.makedirs(out, exist_ok=True)
    if args.ours_only:
        if not os.path.exists(os.path.join(out, "scrapy.xml")):
            sys.exit(f"no run with Scrapy's scheduler in {out}: run without --ours-only first")
        theirs = read_junit(os.path.join(out, "scrapy.xml"))
        opened = os.path.join(out, "scrapy.opened")
        crawled = set(open(opened).read().split()) if os.path.exists(opened) else set()
    else:
        theirs, crawled = run_suite(src, python, args.modules, None, os.path.join(out, "scrapy"), args.timeout)
    crawling = ({opened_module(n) for n in crawled} | set(REQUIRED)) & set(args.modules)
    ours, _ = run_suite(src, python, [m for m in args.modules if m in crawling], OURS, os.path.join(out, "ours"),
                        args.timeout)
    report(theirs, ours, crawling)


if __name__ == "__main__":
    main()
