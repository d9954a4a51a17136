"""The page database (LMDB), below everything else in the package.

- :mod:`.pagedb`: :class:`~.pagedb.PageDB`, the database of one crawl.
- :mod:`.sidetable`: per-page tables that features declare (with codecs).
- :mod:`.meta`: the metadata document and its sections.
- :mod:`.vertices`, :mod:`.pagelog`: the page table, in memory and on disk.
- :mod:`.edges`: out-links in merged blocks. :mod:`.vectors`: named score vectors.
- :mod:`.hosts`, :mod:`.urls`, :mod:`.keys`: host ids, URL checks and
  fingerprints, page keys.
- :mod:`.environment`, :mod:`.lock`, :mod:`.errors`: opening, the writer
  lock, the errors raised.

Nothing here imports the rest of the package (scoring, scheduling, the
core, the adapters, the tools), nor its settings: callers pass plain values.
"""
