"""Host keys: which hosts the crawler reports as busy (``overused_keys``).

Frontera names busy downloader slots by host name (``key_type="domain"``)
or by IP address (``"ip"``). The queue works with host ids, so a busy key
set becomes a test on host ids. IP addresses are resolved once per host
and cached (``socket.gethostbyname``, which blocks: only with
``key_type="ip"``, once per host).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Sequence

from ..storage.hosts import HostNames


class HostKeys:
    """Busy-host tests over the host names of a page database.

    Parameters
    ----------
    host_names : HostNames or list of str
        Host name of each host id (grows as hosts are found).
    """

    def __init__(self, host_names: Sequence[str] | HostNames) -> None:
        self.host_names = host_names
        self._ip: dict[str, str] = {}

    def skip_function(self, key_type: str, overused: Iterable[str]) -> Callable[[int], bool] | None:
        """Test ``host id -> busy`` for the keys ``overused`` (None: none busy)."""
        if not overused:
            return None
        overused = set(overused)
        names = self.host_names
        if key_type == "ip":
            return lambda h: self.ip(names[h]) in overused
        return lambda h: names[h] in overused

    def ip(self, host: str) -> str:
        """IP address of ``host`` (the host itself if it does not resolve)."""
        ip = self._ip.get(host)
        if ip is None:
            try:
                ip = socket.gethostbyname(host)
            except OSError:
                ip = host
            self._ip[host] = ip
        return ip
