"""Several spiders, one frontier: the frontier as a service over a broker.

``frontera-linkrank serve-frontier`` (:mod:`.server`) owns the page
database and hands out requests through a broker (:mod:`.transport`,
:mod:`.redis_transport`); spiders with ``LINKRANK_FRONTIER_URL`` fetch them
(:mod:`.client`, used by :mod:`frontera_linkrank.scrapy.remote`). Messages
are msgpack (:mod:`.codec`); hosts are spread over partitions owned by one
spider each (:mod:`.assignment`); each report is applied once
(:mod:`.leases`).
"""
