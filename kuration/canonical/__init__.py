"""Canonical bytes: what makes a digest, a fingerprint or a written file the same on every
machine. :mod:`~kuration.canonical.hashing` digests canonical JSON and code,
:mod:`~kuration.canonical.floats` gives every float one bit pattern whatever CPU computed
it, and :mod:`~kuration.canonical.strict_json` reads JSON that refuses what would make two
readers disagree (duplicate keys, NaN, numbers past int64 or float range, deep nesting).
"""
