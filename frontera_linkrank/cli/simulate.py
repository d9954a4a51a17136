"""frontera-linkrank simulate: compare crawl policies on a link graph.

The command lives in :mod:`frontera_linkrank.simulation.cli`; this module
runs it as a tool, so a page database given as the graph that cannot be
opened is one line on stderr and exit status 2 like the other tools.
"""

from __future__ import annotations

from .common import Argv, tool


@tool("frontera-linkrank simulate")
def main(argv: Argv, prog: str) -> int:
    """Run :func:`frontera_linkrank.simulation.cli.main` on ``argv``."""
    # Imported here: the simulator pulls in Frontera and the policies.
    from ..simulation.cli import main as simulate_main

    return simulate_main(argv)
