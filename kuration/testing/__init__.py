"""Contract kits: the test suites every implementation of a Kuration boundary passes, shipped
in the library so that a plugin's implementation runs the very suite the built-in ones run.

A plugin's test module subclasses a kit and supplies only what the kit cannot know: how to
build the implementation and how to put known data into its native form. Each kit's
docstring lists those hooks. For a source adapter::

    from kuration.testing import AdapterContract

    class TestMine(AdapterContract):
        media_provider = "my_frames"

        def write(self, root, episodes): ...        # the episodes, in your format, under root
        def make_adapter(self, root, schema): ...   # your adapter over that folder
        def expected_ids(self, count): ...          # the source ids it lists, in order

then ``pytest test_mine.py``. One kit per boundary:

- :class:`AdapterContract`: :class:`~kuration.sources.SourceAdapter`;
- :class:`MediaProviderContract` (and :class:`WholeFileProviderContract`):
  :class:`~kuration.sources.media.MediaProvider`;
- :class:`ShardContainerContract`: :class:`~kuration.output.containers.ShardContainer`;
- :class:`DestinationContract`: :class:`~kuration.output.destinations.Destination`;
- :class:`ScoreCacheContract` (and the persistent and fsspec ones):
  :class:`~kuration.scoring.cache.ScoreCache`;
- :class:`ShardSourceContract`: :class:`~kuration.read.committed.ShardSource`;
- :class:`AttributeLoaderContract`: :class:`~kuration.splits.universe.AttributeLoader`;
- :class:`OutputEncoderContract`: :class:`~kuration.output.encoders.OutputEncoder`;
- :class:`RolloutRecipeContract`: :class:`~kuration.rollouts.RolloutRecipe`.

Kuration's own implementations run the same kits (``tests/sources``, ``tests/output``,
``tests/scoring``, ``tests/read``, ``tests/splits``, ``tests/rollouts``, ``tests/remote``).

The kits need pytest and hypothesis: ``pip install "kuration[testing]"``. ``import kuration``
never imports this package, and this package imports a kit's module only when its name is
first used, so a test of one adapter does not load h5py or zarr for the others. Importing the
package registers the kit modules for pytest's assertion rewriting, so a failing check shows
the values it compared.

What it deliberately does not do: start services (an object store for a remote destination,
say); a subclass that needs one brings its own fixture.
"""

from __future__ import annotations

import pytest

from kuration.lazy_exports import lazy_getattr

#: Each kit (and the helpers a subclass uses) by the module that defines it.
_KITS = {
    "AdapterContract": "kuration.testing.adapter",
    "MediaProviderContract": "kuration.testing.media",
    "WholeFileProviderContract": "kuration.testing.media",
    "ShardContainerContract": "kuration.testing.container",
    "DestinationContract": "kuration.testing.destination",
    "Killed": "kuration.testing.destination",
    "ScoreCacheContract": "kuration.testing.score_cache",
    "PersistentScoreCacheContract": "kuration.testing.score_cache",
    "FsspecScoreCacheContract": "kuration.testing.score_cache",
    "ShardSourceContract": "kuration.testing.shard_source",
    "AttributeLoaderContract": "kuration.testing.attributes",
    "OutputEncoderContract": "kuration.testing.encoder",
    "RolloutRecipeContract": "kuration.testing.recipe",
}

# Before any kit module is imported: pytest rewrites only modules it was told about in time.
pytest.register_assert_rewrite(*sorted(set(_KITS.values())))

__getattr__ = lazy_getattr(__name__, _KITS)

__all__ = sorted(_KITS)
