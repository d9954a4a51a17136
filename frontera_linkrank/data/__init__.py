"""Real web graphs (see the README of each folder).

Installed with the package, read through :mod:`importlib.resources`:

- ``hollins/``: the Hollins University site crawl of January 2004
  (6,012 pages, 23,875 links, real URLs);
- ``polblogs/``: the US political blogs of 2004 (1,490 blogs).

Kept in the ``datasets/`` folder of the source repository, too big for the
wheel (tests and benchmarks use them):

- ``uk-2007-05-100000/``: the first 100,000 pages of the LAW ``uk-2007-05``
  crawl of .uk (3,050,615 links, no URLs) as CSR arrays, 13 MB;
- ``ukwa-1996-hosts/``: the UK Web Archive host link graph of 1996
  (58,842 hosts), 2 MB.

:func:`path` finds the latter in the folder named by the environment
variable ``FRONTERA_LINKRANK_DATASETS``, else in the ``datasets/`` folder
beside the package in a source checkout (an editable install, or the
checkout on ``sys.path``) or in the current directory. The loaders are in
:mod:`frontera_linkrank.simulation.datasets`.
"""

import os
from importlib.resources import files

__all__ = ["ENV", "NAMES", "REPOSITORY_NAMES", "path"]

#: The folders installed with the package.
NAMES = ("hollins", "polblogs")

#: The folders kept in the repository's ``datasets/`` folder only.
REPOSITORY_NAMES = ("uk-2007-05-100000", "ukwa-1996-hosts")

#: The environment variable naming a folder that holds :data:`REPOSITORY_NAMES`.
ENV = "FRONTERA_LINKRANK_DATASETS"


def path(*parts: str) -> str:
    """File-system path of a data file or folder.

    Parameters
    ----------
    *parts : str
        Path components below the data folder, e.g.
        ``("hollins", "links.dat")``.

    Returns
    -------
    str
        The path; it exists.

    Raises
    ------
    FileNotFoundError
        If nothing of that name exists; for a graph of
        :data:`REPOSITORY_NAMES` not found, the message says where to get
        it. Also if the package is installed in a form that is not a folder
        on disk (a zip archive), where the loaders, which read with ``open``
        and ``numpy.load``, cannot use it.

    >>> os.path.basename(path("hollins", "links.dat"))
    'links.dat'
    """
    rel = "/".join(parts)
    if parts and parts[0] in REPOSITORY_NAMES:
        return _repository_path(parts)
    res = files(__name__)
    for part in parts:
        res = res / part
    if not (res.is_file() or res.is_dir()):
        raise FileNotFoundError(f"{rel}: not among the data of frontera_linkrank "
                                f"({', '.join(NAMES + REPOSITORY_NAMES)})")
    try:
        return os.fspath(res)
    except TypeError:
        raise FileNotFoundError(f"{rel}: frontera_linkrank is installed in a zip archive; "
                                "install it as files (pip install) to use its data") from None


def _folders() -> list[str]:
    """Where :data:`REPOSITORY_NAMES` are looked for: the folder named by
    :data:`ENV` if set; else ``datasets/`` beside the package folder (a
    source checkout) and in the current directory (the root of a checkout,
    whatever the install)."""
    if os.environ.get(ENV):
        return [os.environ[ENV]]
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    beside = os.path.join(os.path.dirname(package), "datasets")
    return [beside, os.path.abspath("datasets")]


def _repository_path(parts: tuple[str, ...]) -> str:
    for folder in _folders():
        p = os.path.join(folder, *parts)
        if os.path.exists(p):
            return p
    rel = "/".join(parts)
    where = f"not found in {ENV}={os.environ[ENV]}" if os.environ.get(ENV) else "not installed with the package"
    raise FileNotFoundError(f"{rel}: {where}; it is in the datasets/ folder of the frontera_linkrank source "
                            f"repository: run from a checkout, set {ENV} to that folder, or pass the file's path")
