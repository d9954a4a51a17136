"""Real web graphs shipped with the package (see the README of each folder).

- ``hollins/``: the Hollins University site crawl of January 2004
  (6,012 pages, 23,875 links, real URLs);
- ``uk-2007-05-100000/``: the first 100,000 pages of the LAW ``uk-2007-05``
  crawl of .uk (3,050,615 links, no URLs) as CSR arrays;
- ``ukwa-1996-hosts/``: the UK Web Archive host link graph of 1996
  (58,842 hosts);
- ``polblogs/``: the US political blogs of 2004 (1,490 blogs).

They are package data, read through :mod:`importlib.resources`, so they are
there after a plain ``pip install`` as well as in a source checkout. The
loaders are in :mod:`frontera_linkrank.simulation.datasets`.
"""

import os
from importlib.resources import files

__all__ = ["NAMES", "path"]

#: The folders shipped here.
NAMES = ("hollins", "uk-2007-05-100000", "ukwa-1996-hosts", "polblogs")


def path(*parts: str) -> str:
    """File-system path of a file or folder shipped in this package.

    Parameters
    ----------
    *parts : str
        Path components below the package folder, e.g.
        ``("hollins", "links.dat")``.

    Returns
    -------
    str
        The path; it exists.

    Raises
    ------
    FileNotFoundError
        If nothing of that name is shipped, or the package is installed in
        a form that is not a folder on disk (a zip archive), where the
        loaders, which read with ``open`` and ``numpy.load``, cannot use it.

    >>> os.path.basename(path("hollins", "links.dat"))
    'links.dat'
    """
    res = files(__name__)
    for part in parts:
        res = res / part
    if not (res.is_file() or res.is_dir()):
        raise FileNotFoundError(f"{'/'.join(parts)}: not among the data shipped with frontera_linkrank "
                                f"({', '.join(NAMES)})")
    try:
        return os.fspath(res)
    except TypeError:
        raise FileNotFoundError(f"{'/'.join(parts)}: frontera_linkrank is installed in a zip archive; "
                                "install it as files (pip install) to use its data") from None
