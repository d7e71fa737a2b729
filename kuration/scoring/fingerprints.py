"""What a scoring run depends on, as digests: the keys of the score cache's namespaces.

:func:`run_fingerprint` keys a source's whole scored table: the schema, the segmenter, the
strategy, the Kuration and scoring code versions and the code of the user features the
strategy reads. :func:`feature_fingerprints` keys the parts that outlive a strategy change:
a source's segment rows, and each feature's values under its own definition. Both are the
same in every process (:func:`kuration.canonical.hashing.code_fingerprint`), so a worker's
entry is the parent's.

This module computes digests only: it reads no source and touches no cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kuration import _version
from kuration.canonical.hashing import canonical_digest, code_fingerprint, module_source_sha256
from kuration.scoring.features import get_feature, parse_feature_key
from kuration.scoring.segments import Segmenter
from kuration.scoring.strategy import Strategy
from kuration.sources.protocol import SourceAdapter

#: Bump when feature or segment semantics change, so old cache entries stop matching.
# 2: track_steps, sample_hz; 3: canonical floats (no -0.0, one NaN); 4: end-aligned tail window
SCORING_CODE_VERSION = "4"


def _feature_code(strategy: Strategy) -> dict[str, Any]:
    """Fingerprints of the user feature functions the strategy reads, and of the modules
    that define them, so editing one (or a helper beside it in its plugin) misses the cache.

    Through :func:`kuration.canonical.hashing.code_fingerprint`, which is the same in every process:
    a feature holding a lambda or a generator expression once got a new digest per process
    (its nested code object's repr carries an address), so its cache never hit."""
    features: dict[str, Any] = {}
    for key in strategy.feature_keys():
        parsed = parse_feature_key(key)
        if getattr(parsed, "kind", None) == "fn":
            fn = get_feature(parsed.name)
            features[parsed.name] = {"function": code_fingerprint(fn), "module_sha256": module_source_sha256(fn)}
    return features


def run_fingerprint(adapter: SourceAdapter, segmenter: Segmenter, strategy: Strategy) -> str:
    """What scoring depends on besides the source itself."""
    doc = {
        "schema": adapter.schema.fingerprint(), "segmenter": segmenter.fingerprint(),
        "strategy": strategy.fingerprint(), "kuration": _version.__version__, "code": SCORING_CODE_VERSION,
        "features": _feature_code(strategy),
    }
    return canonical_digest(doc)


@dataclass(frozen=True)
class FeatureFingerprints:
    """Cache namespaces that outlive a strategy change: ``segments`` keys a source's segment
    rows without features or priorities (what the segmenter and schema give), ``features``
    each feature key's values. Neither depends on the strategy's weights, predicates,
    method, selection or name; both change with the schema, the segmenter, the kuration
    and scoring code versions, and a ``fn.`` feature's code."""

    segments: str
    features: dict[str, str]


def feature_fingerprints(adapter: SourceAdapter, segmenter: Segmenter, strategy: Strategy) -> FeatureFingerprints:
    """The per-feature cache namespaces of ``strategy``'s features (see :class:`FeatureFingerprints`)."""
    base = {"schema": adapter.schema.fingerprint(), "segmenter": segmenter.fingerprint(),
            "kuration": _version.__version__, "code": SCORING_CODE_VERSION}
    code = _feature_code(strategy)
    features = {}
    for key in strategy.feature_keys():
        parsed = parse_feature_key(key)
        features[key] = canonical_digest({**base, "part": "feature", "key": key, "fn": code.get(parsed.name)
                                          if getattr(parsed, "kind", None) == "fn" else None})
    return FeatureFingerprints(canonical_digest({**base, "part": "segments"}), features)


__all__ = ["SCORING_CODE_VERSION", "FeatureFingerprints", "feature_fingerprints", "run_fingerprint"]
