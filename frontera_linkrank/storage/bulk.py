# Temporary during the redesign: moved to frontera_linkrank.core.graph_import.
from ..core.graph_import import LinkLoader, add_graph, add_pages, set_out_links  # noqa: F401
from ..scheduling.lifecycle import settle as settle_pages  # noqa: F401
