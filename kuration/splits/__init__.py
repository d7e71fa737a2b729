"""Leakage-free data splits over an explicit sample universe (seed 003, Cuvis.AI formats).

Three separable things: the *universe* of samples that exist (``universe.csv`` or a
folder), a *rule* of selectors assigning them to stages (``splits.json``), and the *baked*
assignment you commit (only ``file_indices`` plus a pinned ``universe_hash``), generated
by ``resolve-splits``.
"""

from typing import TYPE_CHECKING

from kuration.lazy_exports import type_checking_exports

if TYPE_CHECKING:
    from kuration.splits.bake import (
        bake_from_split_column,
        bake_random,
        bake_rule,
        bake_stratified,
        baked_config,
    )
    from kuration.splits.config import (
        Constraint,
        ConstraintKind,
        ConstraintSeverity,
        DataSplitConfig,
        dumps_splits,
        load_splits,
        loads_splits,
        save_splits,
    )
    from kuration.splits.drift import DriftReport, evaluate_drift, has_dir_indices, verify_universe
    from kuration.splits.extend import (
        EXTENSION_SCHEME,
        SplitExtension,
        bake_file,
        extend_baked,
        extend_computed,
        extend_split,
        hashed_stage,
    )
    from kuration.splits.leakage import (
        ConstraintResult,
        LeakageReport,
        enforce,
        evaluate_constraints,
        evaluate_leakage,
        validate_leakage,
    )
    from kuration.splits.resolution import SplitResolution, plan_splits, resolve_splits
    from kuration.splits.resolve import required_attrs, resolve_positions, resolve_selectors
    from kuration.splits.sample_ref import SampleRef
    from kuration.splits.selectors import Selector, SelectorKind, compress_ids, expand_ids
    from kuration.splits.stages import EXCLUSIVE_STAGES, STAGES
    from kuration.splits.universe import (
        WHOLE_FILE,
        AttributeLoader,
        CocoAnnotationAttributes,
        PreloadedAttributes,
        SampleAttributes,
        SampleRefs,
        Universe,
        UniverseColumns,
        enumerate_folder,
        universe_hash,
    )
    from kuration.splits.universe_csv import read_landing_universe, read_universe_csv

__getattr__ = type_checking_exports(__name__, __file__)

__all__ = [
    "EXCLUSIVE_STAGES",
    "EXTENSION_SCHEME",
    "STAGES",
    "WHOLE_FILE",
    "AttributeLoader",
    "CocoAnnotationAttributes",
    "Constraint",
    "ConstraintKind",
    "ConstraintResult",
    "ConstraintSeverity",
    "DataSplitConfig",
    "DriftReport",
    "LeakageReport",
    "PreloadedAttributes",
    "SampleAttributes",
    "SampleRef",
    "SampleRefs",
    "Selector",
    "SelectorKind",
    "SplitExtension",
    "SplitResolution",
    "Universe",
    "UniverseColumns",
    "bake_file",
    "bake_from_split_column",
    "bake_random",
    "bake_rule",
    "bake_stratified",
    "baked_config",
    "compress_ids",
    "dumps_splits",
    "enforce",
    "enumerate_folder",
    "evaluate_constraints",
    "evaluate_drift",
    "evaluate_leakage",
    "expand_ids",
    "extend_baked",
    "extend_computed",
    "extend_split",
    "has_dir_indices",
    "hashed_stage",
    "load_splits",
    "loads_splits",
    "plan_splits",
    "read_landing_universe",
    "read_universe_csv",
    "required_attrs",
    "resolve_positions",
    "resolve_selectors",
    "resolve_splits",
    "save_splits",
    "universe_hash",
    "validate_leakage",
    "verify_universe",
]
