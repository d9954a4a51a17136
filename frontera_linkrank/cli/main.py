"""``frontera-linkrank COMMAND [ARGS...]``: every tool of the project.

The commands are listed in :data:`.commands.COMMANDS`; each one's page
database tools are also installed as ``page_db_NAME`` scripts, with the
same arguments, output and exit status.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .commands import BY_NAME, COMMANDS, PROG
from .common import error_line


def usage() -> str:
    """The top-level help: one line per command."""
    width = max(len(c.name) for c in COMMANDS)
    lines = [
        f"usage: {PROG} COMMAND [ARGS...]",
        "",
        "Crawl frontier tools: inspect and maintain page databases, serve a test web, simulate crawl policies, "
        "serve one frontier to many spiders.",
        "",
        "commands:",
    ]
    lines += [f"  {c.name:<{width}}  {c.summary}" + (f" (also {c.alias})" if c.alias else "") for c in COMMANDS]
    lines += ["", f"'{PROG} COMMAND --help' shows a command's arguments; '{PROG} --version' the version."]
    return "\n".join(lines)


def version() -> str:
    """``frontera-linkrank X.Y.Z``: the version of the installed distribution
    (its metadata, so what pip installed, whatever is on ``sys.path``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"{PROG} {installed('frontera_linkrank')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return f"{PROG}: version unknown (not installed; pip install . records it)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``frontera-linkrank``: dispatch ``argv[0]`` to its command.

    Returns the command's exit status; 0 for help and ``--version``, 2
    (one line on stderr) for an unknown command.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(version())
        return 0
    command = BY_NAME.get(argv[0])
    if command is None:
        error_line(PROG, f"unknown command {argv[0]!r} (one of {', '.join(BY_NAME)}; see {PROG} --help)")
        return 2
    return command.load()(argv[1:], prog=command.prog)


if __name__ == "__main__":
    sys.exit(main())
