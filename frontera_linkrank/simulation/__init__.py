"""Simulated crawls over known link graphs, for measuring crawl order.

A simulated fetch of page ``p`` reveals only ``p``'s out-links, exactly as a
real crawl would; the frontier under test is driven through Frontera's
``FrontierManager``.
"""
