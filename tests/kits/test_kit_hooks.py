"""A plugin's test class that leaves out one of its kit's hooks fails at once, naming the
hook, instead of deep inside a test with an error of the kit's own."""

from __future__ import annotations

import abc
import inspect

import pytest

import kuration.testing as kits


def _contracts() -> list[type]:
    return [obj for name in kits.__all__ if inspect.isclass(obj := getattr(kits, name)) and name.endswith("Contract")]


@pytest.mark.parametrize("contract", [c for c in _contracts() if inspect.isabstract(c)], ids=lambda c: c.__name__)
def test_a_subclass_missing_a_hook_cannot_be_made_and_the_error_names_it(contract):
    missing = sorted(contract.__abstractmethods__)
    incomplete = type("TestIncomplete", (contract,), {})
    with pytest.raises(TypeError, match=missing[0]):
        incomplete()


def test_every_kit_with_hooks_declares_them_abstract():
    # a hook the subclass must supply is an abstract method, so leaving it out fails as above
    hooked = [c.__name__ for c in _contracts() if issubclass(c, abc.ABC)]
    assert {"AdapterContract", "AttributeLoaderContract", "DestinationContract", "OutputEncoderContract",
            "MediaProviderContract", "RolloutRecipeContract", "ScoreCacheContract",
            "ShardSourceContract"} <= set(hooked)


def test_a_container_kit_without_its_container_says_what_to_define():
    class TestNoContainer(kits.ShardContainerContract):
        pass

    with pytest.raises(TypeError, match="TestNoContainer must define the container fixture"):
        kits.ShardContainerContract.container.__wrapped__(TestNoContainer())
