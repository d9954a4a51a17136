"""``python -m frontera_linkrank.settings``: print the settings document.

``--markdown`` prints ``docs/settings.md``; ``--table`` only the table;
``--update-readme FILE`` rewrites the table between FILE's
``<!-- settings-table:begin -->`` / ``<!-- settings-table:end -->`` markers.
"""

from __future__ import annotations

import argparse
import sys

from .markdown import BEGIN, END, markdown_document, markdown_table, replace_block


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m frontera_linkrank.settings", description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="print the settings document (docs/settings.md)")
    group.add_argument("--table", action="store_true", help="print the settings table only")
    group.add_argument("--update-readme", metavar="FILE", help=f"replace the table between {BEGIN} and {END}")
    args = ap.parse_args(argv)
    if args.update_readme:
        with open(args.update_readme, encoding="utf-8") as f:
            text = f.read()
        new = replace_block(text)
        if new is None:
            print(f"{args.update_readme}: no {BEGIN} ... {END} markers", file=sys.stderr)
            return 1
        if new != text:
            with open(args.update_readme, "w", encoding="utf-8") as f:
                f.write(new)
        return 0
    sys.stdout.write(markdown_document() if args.markdown else markdown_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
