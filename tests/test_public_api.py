"""The top-level imports the seed's examples use, and that ``import kuration`` stays light."""

import importlib
import subprocess
import sys

import pytest

import kuration
from kuration.lazy_exports import type_checking_names

#: The packages whose names are imported on first use (:func:`kuration.lazy_exports.type_checking_exports`).
DEFERRING_PACKAGES = ("kuration", "kuration.budget", "kuration.output", "kuration.sources", "kuration.splits")


def test_the_seed_examples_import_from_the_package():
    from kuration import OutputSpec, Segmenter, write_dataset, write_track
    from kuration.output.write_dataset import write_dataset as defined_in

    assert write_dataset is defined_in
    assert OutputSpec.__module__ == "kuration.output.spec" and write_track.__module__ == "kuration.output.write_track"
    assert Segmenter(4, 2, unit="seconds", sample_hz=20).sample_hz == 20
    assert set(type_checking_names(kuration.__file__)) <= set(kuration.__all__)


@pytest.mark.parametrize("package", DEFERRING_PACKAGES)
def test_every_deferred_name_is_exported_and_resolves_to_its_modules_object(package):
    module = importlib.import_module(package)
    deferred = type_checking_names(module.__file__)
    assert deferred, f"{package} defers no name: drop it from DEFERRING_PACKAGES"
    deferred.update({name: (source, name) for name, source in getattr(module, "_ABOVE", {}).items()})
    assert set(deferred) <= set(module.__all__), sorted(set(deferred) - set(module.__all__))
    for name, (source, original) in deferred.items():
        # a name that is also a submodule would come back as the module once that is imported
        importlib.import_module(source)
        assert getattr(module, name) is getattr(importlib.import_module(source), original), f"{package}.{name}"
    for name in module.__all__:
        getattr(module, name)


def test_a_deferred_name_is_imported_only_when_asked_for():
    program = ("import sys, kuration.splits as s; before = 'kuration.splits.universe' in sys.modules; s.Universe; "
               "print(before, 'kuration.splits.universe' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_importing_kuration_does_not_load_the_writer():
    program = "import sys, kuration; print('kuration.output.write_dataset' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_an_unknown_name_is_an_attribute_error():
    try:
        kuration.write_everything  # noqa: B018
    except AttributeError as exc:
        assert "write_everything" in str(exc)
    else:
        raise AssertionError("kuration.write_everything resolved")
