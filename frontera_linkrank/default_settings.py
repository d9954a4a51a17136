"""Every frontera_linkrank setting, with its default, as module constants.

Like Scrapy's own ``default_settings``: a value given in the Frontera
settings of the ``FrontierManager`` (or, through the Scrapy scheduler, in
the Scrapy project's settings) overrides the default here. The constants
are made from the settings table (:mod:`frontera_linkrank.settings.table`),
where each one is documented with the values it allows; ``docs/settings.md``
lists them all. :mod:`frontera_linkrank.settings` validates them and fails
with a message naming the setting.

>>> from frontera_linkrank import default_settings
>>> default_settings.LINKRANK_POLICY, default_settings.LINKRANK_DAMPING
('hybrid-push', 0.85)
"""

from .settings.table import TABLE as _TABLE

globals().update({_name: _setting.default for _name, _setting in _TABLE.items()})

__all__ = list(_TABLE)
