"""Fingerprints of user code: they change when the code or its state does, and not from one
process to the next."""

import functools
import subprocess
import sys
import textwrap

import pytest

from kuration.canonical.hashing import code_fingerprint, stable_repr
from kuration.output.write_dataset import DifferentRunError, write_dataset
from tests.output.corpus import Corpus


def by_site(source_id):
    return source_id.split("/")[0]


def by_site_edited(source_id):
    return source_id.split("/")[1]


class Scaler:
    def __init__(self, factor):
        self.factor = factor
        self.handle = object()  # a repr with an address

    def timestep(self, record, ctx):
        return record


def test_names_code_and_state():
    fp = code_fingerprint(by_site)
    assert fp["name"] == f"{__name__}.by_site" and len(fp["code_sha256"]) == 64
    assert code_fingerprint(by_site_edited)["code_sha256"] != fp["code_sha256"]
    assert code_fingerprint(Scaler(2))["state"]["factor"] == 2
    assert code_fingerprint(Scaler(2)) != code_fingerprint(Scaler(3))
    assert code_fingerprint(None) is None


def test_closures_partials_and_methods_carry_their_state():
    def grouped_by(depth):
        return lambda source_id: "/".join(source_id.split("/")[:depth])
    assert code_fingerprint(grouped_by(1)) != code_fingerprint(grouped_by(2))
    assert code_fingerprint(grouped_by(1)) == code_fingerprint(grouped_by(1))

    def split_at(source_id, depth):
        return source_id.split("/")[depth]
    at_0, at_1 = functools.partial(split_at, depth=0), functools.partial(split_at, depth=1)
    assert code_fingerprint(at_0) != code_fingerprint(at_1)
    assert code_fingerprint(Scaler(2).timestep)["state"]["self"]["state"]["factor"] == 2
    assert code_fingerprint(len)["name"] == "builtins.len"


def test_explicit_state_replaces_the_attributes():
    fp = code_fingerprint(Scaler(2), state="Scaler(root='/data')")
    assert fp["state"] == "Scaler(root='/data')"


def test_addresses_are_masked_so_fingerprints_match_across_processes():
    assert " at 0x" not in stable_repr(object()).replace(" at 0x?", "")
    program = textwrap.dedent("""
        import json
        from kuration.canonical.hashing import code_fingerprint
        from tests.output.test_provenance import Scaler, by_site
        print(json.dumps([code_fingerprint(Scaler(2)), code_fingerprint(by_site)], sort_keys=True))
    """)
    runs = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    assert len(runs) == 1


# -- in config.json and the run fingerprint ----------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("provenance-corpus"))


def _write(corpus, out, **kw):
    return write_dataset(out, schema=corpus.schema, adapter=kw.pop("adapter", corpus.adapter),
                         strategy=corpus.settings.strategy, segmenter=corpus.settings.segmenter, spec=corpus.spec,
                         train_hours=40 / 3600, test_hours=20 / 3600, span_seconds=10.0, **kw)


def test_config_fingerprints_the_adapter_encoder_and_callbacks(corpus, tmp_path):
    result = _write(corpus, tmp_path / "out", group_of=by_site)
    provenance = result.config["provenance"]
    assert provenance["callbacks"]["group_of"]["name"] == f"{__name__}.by_site"
    assert provenance["adapter"]["name"] == "kuration.sources.parquet.ParquetTickAdapter"
    assert provenance["adapter"]["state"] == repr(corpus.adapter) and len(provenance["adapter"]["code_sha256"]) == 64
    assert provenance["encoder"]["name"] == "kuration.output.encoders.PassthroughEncoder"
    assert _write(corpus, tmp_path / "out", group_of=by_site, resume=True).reused == len(result.manifest["entries"])


def test_edited_callback_or_adapter_code_is_another_run(corpus, tmp_path):
    out = tmp_path / "out"
    _write(corpus, out, group_of=by_site)

    def by_site_renamed(source_id):  # the same groups, other code
        return source_id.split("/", 1)[0]
    with pytest.raises(DifferentRunError):
        _write(corpus, out, group_of=by_site_renamed, resume=True)

    class PatchedAdapter(type(corpus.adapter)):
        def __repr__(self):
            return f"ParquetTickAdapter({self.root_url!r})"  # the same description, other code
    with pytest.raises(DifferentRunError):
        _write(corpus, out, group_of=by_site, resume=True,
               adapter=PatchedAdapter(corpus.adapter.root_url, corpus.schema))


def test_a_group_of_mapping_is_fingerprinted_by_its_content(corpus, tmp_path):
    out = tmp_path / "out"
    sources = corpus.adapter.list_sources()
    groups = {s: s.split("/")[0] for s in sources}
    result = _write(corpus, out, group_of=groups)
    recorded = result.config["provenance"]["callbacks"]["group_of"]
    assert recorded["name"] == "builtins.dict" and recorded["state"]["items"] == len(sources)
    assert _write(corpus, out, group_of=dict(reversed(groups.items())), resume=True).reused  # same content
    regrouped = {s: "one_group" for s in sources}
    with pytest.raises(DifferentRunError):
        _write(corpus, out, group_of=regrouped, resume=True)
