"""The top-level imports the seed's examples use, and that ``import kuration`` stays light."""

import subprocess
import sys

import kuration


def test_the_seed_examples_import_from_the_package():
    from kuration import OutputSpec, Segmenter, write_dataset, write_track
    from kuration.output.write_dataset import write_dataset as defined_in

    assert write_dataset is defined_in
    assert OutputSpec.__module__ == "kuration.output.spec" and write_track.__module__ == "kuration.output.write_track"
    assert Segmenter(4, 2, unit="seconds", sample_hz=20).sample_hz == 20
    assert set(kuration._LAZY) <= set(kuration.__all__)


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
