"""``kuration.landing.plugins``: where plugins are declared, the order and de-duplication, names
checked, every failure named with where it was declared, and loading once per process."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuration.errors import InputError
from kuration.landing.plugins import (
    ENTRY_POINT_GROUP,
    PLUGINS_ENV,
    LoadedPlugin,
    PluginError,
    check_module_name,
    declared_plugins,
    load_plugins,
    loaded_plugin_modules,
    loaded_plugins,
    parse_plugin_list,
)
from kuration.scoring.features import get_feature
from kuration.sources.media import get_media_provider
from tests.plugins.plugin_factory import PROVIDER_WEIGHT


def test_the_environment_list_is_comma_separated_and_tolerant():
    assert parse_plugin_list("a, b.c ,,  d_e ,") == ["a", "b.c", "d_e"]
    assert parse_plugin_list("") == [] and parse_plugin_list(" , ,") == []
    assert parse_plugin_list("\tone\n") == ["one"]


@given(st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,6}(\.[a-z_][a-z0-9_]{0,6}){0,2}", fullmatch=True), max_size=6),
       st.lists(st.sampled_from([" ", "\t", ""]), min_size=1, max_size=3))
def test_any_spacing_around_names_reads_the_same_list(names, pads):
    text = ",".join(f"{pads[i % len(pads)]}{name}{pads[-1]}" for i, name in enumerate(names)) + ", ,"
    assert parse_plugin_list(text) == names


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "my plugin", "plugins/feat.py", "1abc", "a.class", "a-b"])
def test_a_name_that_is_not_a_module_name_is_refused_naming_it(bad):
    with pytest.raises(PluginError, match=r"plugin module .* \(declared in curation\.json\): not a Python module name"):
        check_module_name(bad, declared_in="curation.json")


def test_plugin_error_is_an_input_error():
    assert issubclass(PluginError, InputError) and issubclass(PluginError, ValueError)


def test_declarations_come_from_the_list_then_the_environment_then_entry_points(plugin_kit):
    plugin_kit.write_distribution("zeta_tools", {"z": "zeta_mod"})
    plugin_kit.write_distribution("alpha_tools", {"b": "alpha_b:register", "a": "alpha_a", "dup": "from_list"})
    found = declared_plugins(["from_list", "shared"], declared_in="landing/curation.json",
                             environ={PLUGINS_ENV: "from_env, shared ,from_list"})
    assert [(d.module, d.declared_in) for d in found] == [
        ("from_list", "landing/curation.json"), ("shared", "landing/curation.json"), ("from_env", PLUGINS_ENV),
        ("alpha_a", f"entry point 'a' of alpha_tools (group {ENTRY_POINT_GROUP})"),
        ("alpha_b", f"entry point 'b' of alpha_tools (group {ENTRY_POINT_GROUP})"),
        ("zeta_mod", f"entry point 'z' of zeta_tools (group {ENTRY_POINT_GROUP})"),
    ]
    assert [d.attr for d in found] == [None, None, None, None, "register", None]
    assert declared_plugins(environ={}, entry_points=False) == []


def test_the_environment_variable_is_read_from_os_environ_by_default(plugin_kit, monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, " one,two ")
    assert [d.module for d in declared_plugins(entry_points=False)] == ["one", "two"]


@pytest.mark.parametrize("configured, message", [
    ("my_plugin", r"must be a list of module names.*got 'my_plugin'"),
    (None, r"must be a list of module names.*got None"),
    (["ok", 3], r"plugin 3 \(declared in curation\.json, item 1\): a plugin is a module name"),
    (["ok", "a..b"], r"plugin module 'a\.\.b' \(declared in curation\.json, item 1\): not a Python module name"),
])
def test_a_bad_configured_list_is_refused_naming_the_item(configured, message):
    with pytest.raises(PluginError, match=message):
        declared_plugins(configured, declared_in="curation.json", environ={}, entry_points=False)


def test_a_bad_name_in_the_environment_names_the_variable():
    with pytest.raises(PluginError, match=rf"plugin module 'a\.\.b' \(declared in {PLUGINS_ENV}\)"):
        declared_plugins(environ={PLUGINS_ENV: "fine, a..b"}, entry_points=False)


@pytest.mark.parametrize("value", ["pkg..mod", "pkg.mod:", "pkg.mod:a b", "pkg.mod:1x"])
def test_a_bad_entry_point_value_names_the_distribution(plugin_kit, value):
    plugin_kit.write_distribution("broken_dist", {"bad": value})
    with pytest.raises(PluginError, match=r"entry point 'bad' of broken_dist \(group kuration\.plugins\)"):
        declared_plugins(environ={})


def test_loading_imports_the_plugins_and_what_they_register_exists(plugin_kit):
    media, features = plugin_kit.write_media_plugin(), plugin_kit.write_feature_plugin()
    loaded = load_plugins([features], declared_in="curation.json", environ={PLUGINS_ENV: media},
                          entry_points=False)
    assert [p.module for p in loaded] == [features, media]
    assert loaded[0] == LoadedPlugin(features, "curation.json", str(plugin_kit.folder / f"{features}.py"))
    assert loaded[1].to_dict() == {"module": media, "declared_in": PLUGINS_ENV,
                                   "file": str(plugin_kit.folder / f"{media}.py")}
    assert get_media_provider(plugin_kit.provider).weight == PROVIDER_WEIGHT
    assert get_feature(plugin_kit.feature).__module__ == features
    assert loaded_plugin_modules() == (features, media) and loaded_plugins() == loaded


def test_loading_twice_imports_once_and_keeps_the_first_declaration(plugin_kit):
    counter = plugin_kit.write("counted", """
        import builtins
        builtins.kplug_import_count = getattr(builtins, "kplug_import_count", 0) + 1
    """)
    import builtins

    builtins.kplug_import_count = 0  # type: ignore[attr-defined]
    try:
        first = load_plugins([counter], declared_in="first", environ={}, entry_points=False)
        again = load_plugins(environ={PLUGINS_ENV: counter}, entry_points=False)
        assert builtins.kplug_import_count == 1  # type: ignore[attr-defined]
        assert again == first and again[0].declared_in == "first"
        assert loaded_plugin_modules() == (counter,)
    finally:
        del builtins.kplug_import_count  # type: ignore[attr-defined]


def test_entry_points_load_the_module_and_check_but_never_call_the_attribute(plugin_kit):
    module = plugin_kit.write("hooked", """
        calls = []
        def register():
            calls.append("called")
        class Holder:
            inner = staticmethod(register)
    """)
    plugin_kit.write_distribution("hooked_dist", {"hook": f"{module}:register", "nested": f"{module}:Holder.inner"})
    (loaded,) = load_plugins(environ={})
    assert loaded.module == module and loaded.declared_in.startswith("entry point 'hook' of hooked_dist")
    assert sys.modules[module].calls == []


def test_an_entry_point_naming_a_missing_attribute_fails_naming_it(plugin_kit):
    module = plugin_kit.write("plain", "x = 1\n")
    plugin_kit.write_distribution("typo_dist", {"p": f"{module}:regsiter"})
    with pytest.raises(PluginError, match=rf"plugin module '{module}' \(declared in entry point 'p' of typo_dist "
                                          r"\(group kuration\.plugins\)\) has no attribute 'regsiter'"):
        load_plugins(environ={})
    assert loaded_plugin_modules() == ()


def test_a_missing_module_says_where_it_was_declared_and_how_to_fix_it(plugin_kit):
    with pytest.raises(PluginError) as caught:
        load_plugins(environ={PLUGINS_ENV: f"{plugin_kit.prefix}_nowhere"}, entry_points=False)
    message = str(caught.value)
    assert message.startswith(f"plugin module '{plugin_kit.prefix}_nowhere' (declared in {PLUGINS_ENV}) cannot be "
                              f"imported: No module named '{plugin_kit.prefix}_nowhere'")
    assert "this Python environment, or add the folder holding it to PYTHONPATH (searched [" in message
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)


def test_a_missing_submodule_of_a_missing_package_is_the_plugin_not_being_found(plugin_kit):
    with pytest.raises(PluginError, match=r"cannot be imported: No module named 'kplug_nopkg_.*'\. Install the package "
                                          r"that provides it in the Dagster code location"):
        load_plugins([f"kplug_nopkg_{plugin_kit.prefix}.features"], environ={}, entry_points=False,
                     environment="the Dagster code location")


def test_a_dependency_the_plugin_lacks_is_named(plugin_kit):
    module = plugin_kit.write("needy", f"import {plugin_kit.prefix}_absent_dependency\n")
    with pytest.raises(PluginError, match=rf"plugin module '{module}' \(declared in curation\.json\) failed to import: "
                                          rf"it imports '{plugin_kit.prefix}_absent_dependency', which is not "
                                          r"installed in this Python environment"):
        load_plugins([module], environ={}, entry_points=False)


@pytest.mark.parametrize("source, raised", [
    ("raise RuntimeError('no licence file')\n", r"RuntimeError: no licence file"),
    ("def broken(:\n", r"SyntaxError: "),
    ("from kuration.scoring.features import register_feature\nregister_feature('', len)\n",
     r"FeatureError: register_feature: name must be a non-empty string"),
])
def test_an_exception_at_import_is_named_with_the_module_and_its_declaration(plugin_kit, source, raised):
    module = plugin_kit.write("raising", source)
    with pytest.raises(PluginError, match=rf"plugin module '{module}' \(declared in {PLUGINS_ENV}\) raised at import: "
                                          rf"{raised}.*Fix the module"):
        load_plugins(environ={PLUGINS_ENV: module}, entry_points=False)


def test_a_failure_stops_loading_and_a_fixed_plugin_loads_on_the_next_call(plugin_kit):
    good = plugin_kit.write("good", "x = 1\n")
    bad = plugin_kit.write("flaky", "raise RuntimeError('not yet')\n")
    after = plugin_kit.write("after", "x = 2\n")
    with pytest.raises(PluginError, match="not yet"):
        load_plugins([good, bad, after], environ={}, entry_points=False)
    assert loaded_plugin_modules() == (good,) and after not in sys.modules
    (plugin_kit.folder / f"{bad}.py").write_text("x = 3\n")
    assert [p.module for p in load_plugins([good, bad, after], environ={}, entry_points=False)] == [good, bad, after]
