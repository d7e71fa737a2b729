"""``import streaming`` (MosaicML Streaming) inside its peer venv, run by the peer scripts.

``import streaming`` imports torchvision (for its vision datasets), and torchvision's PyPI
wheel is built for CUDA torch: next to the CPU build it fails to load its operators. Then
the three torchvision names ``streaming.vision`` imports are stubbed (the MDS writer and
readers never call them), and the import error is returned so the bench can say so.
Only the standard library is imported here besides streaming itself.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types


def import_streaming() -> tuple[types.ModuleType, str | None]:
    """(the ``streaming`` module, the torchvision import error if torchvision was stubbed)."""
    stubbed = None
    try:
        import torchvision  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure to load torchvision's ops means: stub it
        stubbed = f"{type(exc).__name__}: {exc}"
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        stubs = {name: types.ModuleType(name) for name in ("torchvision", "torchvision.datasets",
                                                           "torchvision.transforms",
                                                           "torchvision.transforms.functional")}
        for name, stub in stubs.items():  # what importlib.util.find_spec asks of a module
            stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
        stubs["torchvision.datasets"].VisionDataset = stubs["torchvision.datasets"].CIFAR10 = object  # type: ignore[attr-defined]
        stubs["torchvision.transforms.functional"].to_tensor = None  # type: ignore[attr-defined]
        sys.modules.update(stubs)
    import streaming

    return streaming, stubbed
