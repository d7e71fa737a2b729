"""The attribute loader contract (:class:`kuration.testing.AttributeLoaderContract`) over the
two loaders in the tree: attributes carried by the refs (``PreloadedAttributes``) and COCO
annotation files read lazily (``CocoAnnotationAttributes``)."""

from __future__ import annotations

import json

from kuration.splits import CocoAnnotationAttributes, PreloadedAttributes
from kuration.splits.universe import ANOMALOUS_TAG, NORMAL_TAG
from kuration.testing import AttributeLoaderContract
from kuration.testing.attributes import CATEGORY_NAMES


class TestPreloadedAttributes(AttributeLoaderContract):
    def store(self, root, samples):
        by_uid = {s.uid: (s.tags, s.category_ids) for s in samples}
        return PreloadedAttributes(by_uid, name_to_id=CATEGORY_NAMES), None


class TestCocoAnnotationAttributes(AttributeLoaderContract):
    """One COCO file per source: an image per indexed sample (``id`` = its index, its tags as
    the image's ``tags``), an annotation per category id. A whole-file sample has no image."""

    def store(self, root, samples):
        files: dict[str, dict] = {}
        for s in samples:
            doc = files.setdefault(s.source, {"images": [], "annotations": [], "categories": [
                {"id": i, "name": name} for name, i in CATEGORY_NAMES.items()]})
            if s.index is not None:
                doc["images"].append({"id": s.index, **({"tags": list(s.tags)} if s.tags else {})})
                doc["annotations"] += [{"image_id": s.index, "category_id": c} for c in s.category_ids]
        paths = {}
        for source, doc in files.items():
            paths[source] = root / (source.replace("/", "_") + ".json")
            paths[source].write_text(json.dumps(doc))
        return CocoAnnotationAttributes(), [str(paths[s.source]) for s in samples]

    def expected(self, sample):
        derived = ANOMALOUS_TAG if any(c != 0 for c in sample.category_ids) else NORMAL_TAG
        return (derived, *sample.tags), sample.category_ids
