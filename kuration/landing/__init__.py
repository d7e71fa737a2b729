"""The landing zone: where recordings arrive, and the files that say how to curate them.

A landing zone is a folder (or fsspec URL) holding the recordings, ``universe.csv``,
``schema.json``, ``strategy.json``, ``output_spec.json``, ``curation.json`` and optionally
``quality.json``. :func:`open_landing_zone` opens it in one call and returns one frozen
:class:`LandingZone`: every file read once, the settings resolved by one precedence rule,
the plugins loaded, every reference between the files checked, and a fingerprint of it all.
The modules of this package:

- :mod:`~kuration.landing.zone`: :func:`open_landing_zone` and :class:`LandingZone`;
- :mod:`~kuration.landing.references`: the references between the files, each checked;
- :mod:`~kuration.landing.recordings`: listing recordings, their names and change tokens,
  and what a sensor tick asks for;
- :mod:`~kuration.landing.curation_config`: ``curation.json``, its ``KURATION_*`` overrides
  and the one precedence rule;
- :mod:`~kuration.landing.settings`: the schema, strategy, segmenter and output spec files;
- :mod:`~kuration.landing.plugins`: the plugin modules a landing zone declares;
- :mod:`~kuration.landing.universe_sources`: the sample universe of a landing zone;
- :mod:`~kuration.landing.check`: ``kuration check-landing``, every problem before a run.
"""

from kuration.lazy_exports import lazy_getattr

# Loaded on first use: the plugin loader in this package is imported by every worker process,
# which never opens a landing zone (and the zone's imports reach back to the scoring package).
_LAZY = {name: "kuration.landing.zone" for name in (
    "LandingLayout", "LandingZone", "LandingZoneChangedError", "LandingZoneError", "open_landing_zone")}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [*_LAZY]
