"""The landing zone: where recordings arrive, and the files that say how to curate them.

A landing zone is a folder (or fsspec URL) holding the recordings, ``universe.csv``,
``schema.json``, ``strategy.json``, ``output_spec.json`` and ``curation.json``. This package
is everything that reads it:

- :mod:`~kuration.landing.recordings`: listing recordings, their names and change tokens;
- :mod:`~kuration.landing.curation_config`: ``curation.json`` and its ``KURATION_*`` overrides;
- :mod:`~kuration.landing.settings`: the schema, strategy, segmenter and output spec files;
- :mod:`~kuration.landing.plugins`: the plugin modules a landing zone declares;
- :mod:`~kuration.landing.universe_sources`: the sample universe of a landing zone;
- :mod:`~kuration.landing.check`: ``kuration check-landing``, every problem before a run.
"""
