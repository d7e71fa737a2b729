"""Leakage constraints, the drift guard, and ``resolve_splits`` end to end."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from kuration.errors import SelectorError, SplitConstraintError, SplitLeakageError, UniverseDriftError
from kuration.splits import (
    Constraint,
    DataSplitConfig,
    LeakageReport,
    SampleRef,
    Selector,
    Universe,
    enforce,
    evaluate_constraints,
    evaluate_drift,
    evaluate_leakage,
    has_dir_indices,
    loads_splits,
    plan_splits,
    resolve_splits,
    universe_hash,
    validate_leakage,
    verify_universe,
)
from kuration.splits.leakage import MAX_LISTED
from tests.splits._universes import uids


def S(**kwargs) -> Selector:
    return Selector(**kwargs)


def refs(*uid_group: str) -> list[SampleRef]:
    """``"src#3"`` or ``"src#3@group"`` -> SampleRefs."""
    out = []
    for item in uid_group:
        uid, _, group = item.partition("@")
        source, _, index = uid.rpartition("#")
        out.append(SampleRef(source, int(index), group=group or None))
    return out


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- validate_leakage / evaluate_leakage ----------------------------------------------


class TestValidateLeakage:
    def test_disjoint_split_passes_in_every_mode(self, caplog) -> None:
        train, val, test = refs("a#0", "a#1"), refs("b#0"), refs("c#0", "c#1")
        with caplog.at_level(logging.WARNING):
            for mode in ("error", "warn", "off"):
                report = validate_leakage(train, val, test, mode=mode)
                assert report.ok
                assert not report.errors and not report.warnings
        assert warnings_of(caplog) == []
        report = validate_leakage(train, val, test)
        assert [(r.kind, r.severity, r.status) for r in report.results] == [("no_split_overlap", "error", "satisfied")]
        assert report.summary() == "no leakage (no_split_overlap)"

    def test_uid_overlap_error_raises_naming_stages(self) -> None:
        train, val, test = refs("a#0", "a#1"), refs("b#0"), refs("a#1", "c#0")
        with pytest.raises(SplitLeakageError) as info:
            validate_leakage(train, val, test, mode="error")
        message = str(info.value)
        assert "no_split_overlap violated" in message
        assert "1 sample(s) shared between train and test" in message
        assert "1 group(s) in both train and test: 'a'" in message
        assert "resolve-splits" in message
        assert isinstance(info.value, SplitConstraintError) and isinstance(info.value, RuntimeError)

    def test_group_overlap_without_shared_uid_is_leakage(self) -> None:
        train = refs("rec1#0@site1", "rec2#0@site2")
        val = refs("rec3#0@site1")
        test = refs("rec4#0@site3")
        with pytest.raises(SplitLeakageError, match=r"1 group\(s\) in both train and val: 'site1'"):
            validate_leakage(train, val, test)
        (result,) = evaluate_leakage(train, val, test).results
        assert result.status == "violated"
        # no sample is shared, but the two samples of site1 leak: they are the offenders
        assert result.count == 2 and result.offending == ("rec1#0", "rec3#0")
        assert result.shared_groups == ("site1",) and result.group_count == 1
        assert "sample(s) shared" not in result.reason

    def test_group_defaults_to_source(self) -> None:
        train, test = refs("flight_03.parquet#0"), refs("flight_03.parquet#7")
        with pytest.raises(SplitLeakageError, match=r"train and test: 'flight_03.parquet'"):
            validate_leakage(train, [], test)

    def test_every_pair_is_reported(self) -> None:
        train, val, test = refs("x#0@g1", "y#0@g2"), refs("x#0@g1", "z#0@g3"), refs("y#0@g2", "z#0@g3")
        (result,) = evaluate_leakage(train, val, test).results
        assert result.offending == ("x#0", "y#0", "z#0") and result.count == 3
        assert result.shared_groups == ("g1", "g2", "g3") and result.group_count == 3
        for pair in ("train and val", "train and test", "val and test"):
            assert f"shared between {pair}" in result.reason
            assert f"in both {pair}" in result.reason

    def test_predict_is_not_an_argument_and_never_checked(self) -> None:
        # validate_leakage takes exactly train / val / test: predict may overlap anything.
        with pytest.raises(TypeError):
            validate_leakage(refs("a#0"), [], [], refs("a#0"))  # type: ignore[misc]

    def test_warn_logs_and_returns_report(self, caplog) -> None:
        train, test = refs("a#0"), refs("a#0")
        with caplog.at_level(logging.WARNING, logger="kuration.splits.leakage"):
            report = validate_leakage(train, [], test, mode="warn")
        assert isinstance(report, LeakageReport)
        assert report.ok  # a warn-severity failure is not an error
        (result,) = report.warnings
        assert (result.kind, result.severity, result.status) == ("no_split_overlap", "warn", "violated")
        (message,) = warnings_of(caplog)
        assert "no_split_overlap violated" in message and "train and test" in message

    def test_off_returns_empty_report(self, caplog) -> None:
        everything = refs("a#0", "b#0")
        with caplog.at_level(logging.DEBUG):
            report = validate_leakage(everything, everything, everything, mode="off")
        assert report == LeakageReport(())
        assert report.ok and report.results == ()
        assert warnings_of(caplog) == []

    def test_unknown_mode_rejected(self) -> None:
        with pytest.raises(ValueError, match=r"one of \['error', 'warn', 'off'\], got 'strict'"):
            validate_leakage([], [], [], mode="strict")

    def test_evaluate_leakage_is_pure(self) -> None:
        report = evaluate_leakage(refs("a#0"), refs("a#0"), [], mode="error")
        assert not report.ok
        assert [r.kind for r in report.errors] == ["no_split_overlap"]
        assert report.to_dict()["ok"] is False

    def test_offending_list_is_capped_but_count_is_exact(self) -> None:
        many = [SampleRef(f"s{i:03d}", 0) for i in range(MAX_LISTED + 10)]
        (result,) = evaluate_leakage(many, [], many).results
        assert result.count == MAX_LISTED + 10 and result.group_count == MAX_LISTED + 10
        assert len(result.offending) == MAX_LISTED and len(result.shared_groups) == MAX_LISTED
        assert result.offending == tuple(sorted(r.uid for r in many))[:MAX_LISTED]
        assert "and 55 more" in result.reason

    def test_empty_stages(self) -> None:
        assert validate_leakage([], [], []).ok


# -- evaluate_constraints over a universe ------------------------------------------------


@pytest.fixture
def universe() -> Universe:
    #   0 rec1#0 g1 | 1 rec1#1 g2 | 2 rec2#0 rec2 | 3 rec2#1 rec2 | 4 rec3#0 rec3
    return Universe.from_columns(
        ["rec1", "rec1", "rec2", "rec2", "rec3"], [0, 1, 0, 1, 0], group=["g1", "g2", None, None, None]
    )


def positions(**stages: list[int]) -> dict[str, np.ndarray]:
    return {stage: np.asarray(rows, np.int64) for stage, rows in stages.items()}


class TestEvaluateConstraints:
    def test_split_overlap_by_position(self, universe: Universe) -> None:
        report = evaluate_constraints(
            positions(train=[0, 2], val=[2], test=[4], predict=[0, 1, 2, 3, 4]), universe,
            [Constraint("no_split_overlap")]
        )
        (result,) = report.results
        assert result.status == "violated" and not report.ok
        assert result.offending == ("rec2#0",) and result.count == 1
        assert result.shared_groups == ("rec2",)

    def test_split_overlap_by_group(self, universe: Universe) -> None:
        (result,) = evaluate_constraints(
            positions(train=[2], test=[3]), universe, [Constraint("no_split_overlap")]
        ).results
        assert result.status == "violated" and result.count == 2
        assert result.offending == ("rec2#0", "rec2#1") and result.shared_groups == ("rec2",)
        assert "1 group(s) in both train and test: 'rec2'" in result.reason

    def test_explicit_groups_can_split_one_source(self, universe: Universe) -> None:
        # rec1#0 (g1) and rec1#1 (g2): same source, different groups.
        stages = positions(train=[0], test=[1], val=[4])
        report = evaluate_constraints(
            stages, universe, [Constraint("no_split_overlap"), Constraint("no_source_overlap", "warn")]
        )
        split, source = report.results
        assert split.status == "satisfied"
        assert (source.kind, source.severity, source.status) == ("no_source_overlap", "warn", "violated")
        assert source.offending == ("rec1",) and source.count == 1
        assert report.ok and report.warnings == (source,)

    def test_predict_excluded(self, universe: Universe) -> None:
        stages = positions(train=[0, 1], val=[2, 3], test=[4], predict=[0, 1, 2, 3, 4])
        report = evaluate_constraints(
            stages, universe, [Constraint("no_split_overlap"), Constraint("no_source_overlap")]
        )
        assert [r.status for r in report.results] == ["satisfied", "satisfied"]
        assert report.ok and report.summary() == "no leakage (no_split_overlap, no_source_overlap)"

    def test_missing_stages_count_as_empty(self, universe: Universe) -> None:
        report = evaluate_constraints({"train": np.arange(5)}, universe, [Constraint("no_split_overlap")])
        assert report.results[0].status == "satisfied"

    def test_no_constraints(self, universe: Universe) -> None:
        report = evaluate_constraints(positions(train=[0], test=[0]), universe, [])
        assert report.results == () and report.ok

    def test_no_train_anomalous_unavailable_without_annotations(self, universe: Universe) -> None:
        (result,) = evaluate_constraints(positions(train=[0]), universe, [Constraint("no_train_anomalous")]).results
        assert (result.status, result.failed) == ("unavailable", True)
        assert "no annotation files" in result.reason
        report = LeakageReport((result,))
        assert not report.ok
        with pytest.raises(SplitConstraintError, match="no_train_anomalous unavailable") as info:
            enforce(report)
        assert not isinstance(info.value, SplitLeakageError)

    def test_no_train_anomalous_unavailable_with_empty_annotation_column(self) -> None:
        u = Universe.from_columns(["a", "b"], [0, 0], annotation=[None, ""])
        (result,) = evaluate_constraints(positions(train=[0, 1]), u, [Constraint("no_train_anomalous")]).results
        assert result.status == "unavailable"

    def test_no_train_anomalous_unavailable_at_warn_logs(self, universe: Universe, caplog) -> None:
        report = evaluate_constraints(positions(train=[0]), universe, [Constraint("no_train_anomalous", "warn")])
        with caplog.at_level(logging.WARNING):
            assert enforce(report) is report
        assert any("no_train_anomalous unavailable" in m for m in warnings_of(caplog))

    @pytest.fixture
    def annotated(self, tmp_path) -> Universe:
        coco = tmp_path / "day1.json"
        coco.write_text(json.dumps({
            "images": [{"id": 0}, {"id": 1}, {"id": 2}],
            "annotations": [{"image_id": 1, "category_id": 3}, {"image_id": 2, "category_id": 0}],
            "categories": [{"id": 0, "name": "background"}, {"id": 3, "name": "crack"}],
        }))
        # rows: 0 day1#0 normal | 1 day1#1 anomalous | 2 day1#2 background only | 3 day2#0 no annotation
        return Universe.from_columns(["day1", "day1", "day1", "day2"], [0, 1, 2, 0],
                                     annotation=[str(coco)] * 3 + [None])

    def test_no_train_anomalous_satisfied(self, annotated: Universe) -> None:
        (result,) = evaluate_constraints(
            positions(train=[0, 2, 3], test=[1]), annotated, [Constraint("no_train_anomalous")]
        ).results
        assert result.status == "satisfied"

    def test_no_train_anomalous_violated_names_source(self, annotated: Universe) -> None:
        report = evaluate_constraints(positions(train=[0, 1], test=[3]), annotated, [Constraint("no_train_anomalous")])
        (result,) = report.results
        assert result.status == "violated"
        assert result.offending == ("day1",) and result.count == 1
        assert "1 source(s) with an anomalous sample in train (1 samples)" in result.reason
        with pytest.raises(SplitConstraintError, match=r"no_train_anomalous violated \(1 source"):
            enforce(report)

    def test_error_overlap_raises_leakage_error_source_overlap_raises_constraint_error(
        self, universe: Universe
    ) -> None:
        with pytest.raises(SplitLeakageError):
            enforce(evaluate_constraints(positions(train=[0], test=[0]), universe, [Constraint("no_split_overlap")]))
        with pytest.raises(SplitConstraintError, match="no_source_overlap violated") as info:
            enforce(evaluate_constraints(positions(train=[0], test=[1]), universe, [Constraint("no_source_overlap")]))
        assert not isinstance(info.value, SplitLeakageError)

    def test_results_serialize(self, universe: Universe) -> None:
        report = evaluate_constraints(positions(train=[2], test=[3]), universe,
                                      [Constraint("no_split_overlap", "warn")])
        d = report.to_dict()
        assert d["ok"] is True
        assert d["results"][0] | {"reason": ""} == {
            "kind": "no_split_overlap", "severity": "warn", "status": "violated", "count": 2,
            "offending": ["rec2#0", "rec2#1"],
            "shared_groups": ["rec2"], "group_count": 1, "reason": "",
        }


# -- drift ------------------------------------------------------------------------------


class TestDrift:
    def test_has_dir_indices(self) -> None:
        assert not has_dir_indices(DataSplitConfig())
        assert not has_dir_indices(DataSplitConfig(train=(S(kind="file_indices", source="a", ids=[0]),)))
        assert has_dir_indices(DataSplitConfig(test=(S(kind="dir_indices", ids=[0]),)))
        nested = S(kind="except", of=[S(kind="all"), S(kind="union", of=[S(kind="dir_indices", ids=[1])])])
        assert has_dir_indices(DataSplitConfig(predict=(nested,)))
        assert not has_dir_indices(DataSplitConfig(predict=(S(kind="except",
                                                              of=[S(kind="all"), S(kind="glob", pattern="x")]),)))

    @pytest.fixture
    def old(self) -> Universe:
        return Universe.from_columns(["a.npz", "b.npz", "c.npz"], [0, 0, 0])

    @pytest.fixture
    def new(self) -> Universe:
        return Universe.from_columns(["a.npz", "aa.npz", "b.npz", "c.npz"], [0, 0, 0, 0])

    def test_unpinned(self, new: Universe) -> None:
        cfg = DataSplitConfig(train=(S(kind="dir_indices", ids=[0]),))
        report = verify_universe(cfg, new)
        assert (report.status, report.ok, report.expected) == ("unpinned", True, None)
        assert report.actual == universe_hash(new)
        assert report.message == "the split pins no universe_hash; nothing to verify"

    def test_match(self, old: Universe) -> None:
        cfg = DataSplitConfig(universe_hash=old.hash, train=(S(kind="dir_indices", ids=[0]),))
        report = verify_universe(cfg, old)
        assert (report.status, report.ok, report.has_dir_indices) == ("match", True, True)
        assert report.message == f"universe matches the pinned hash {old.hash[:12]}..."

    def test_position_independent(self, old: Universe, new: Universe) -> None:
        cfg = DataSplitConfig(universe_hash=old.hash, train=(S(kind="file_indices", source="b.npz", ids=[0]),))
        report = verify_universe(cfg, new)
        assert (report.status, report.ok, report.has_dir_indices) == ("position_independent", True, False)
        assert "holds no dir_indices" in report.message

    def test_drifted_raises_with_regenerate_hint(self, old: Universe, new: Universe) -> None:
        nested = S(kind="union", of=[S(kind="dir_indices", ids=[1])])
        cfg = DataSplitConfig(universe_hash=old.hash, val=(nested,))
        report = evaluate_drift(cfg, new)
        assert (report.status, report.ok) == ("drifted", False)
        assert (report.expected, report.actual) == (old.hash, new.hash)
        expected_message = (
            f"universe changed since splits.json was committed (expected {old.hash[:12]}..., got {new.hash[:12]}...). "
            "Re-run resolve-splits, or remove dir_indices in favor of files/file_indices."
        )
        assert report.message == expected_message
        with pytest.raises(UniverseDriftError,
                           match=r"universe changed since splits.json was committed .*Re-run resolve-splits") as info:
            verify_universe(cfg, new)
        assert str(info.value) == expected_message
        assert report.to_dict() == {
            "status": "drifted", "ok": False, "expected": old.hash, "actual": new.hash,
            "has_dir_indices": True, "message": expected_message,
        }

    def test_list_and_universe_give_the_same_verdict(self, old: Universe, new: Universe) -> None:
        cfg = DataSplitConfig(universe_hash=old.hash, train=(S(kind="dir_indices", ids=[0]),))
        assert evaluate_drift(cfg, list(new)) == evaluate_drift(cfg, new)
        assert evaluate_drift(cfg, list(old)).status == "match"


# -- resolve_splits end to end ----------------------------------------------------------


@pytest.fixture
def sessions() -> Universe:
    # 0 d1/a#0 1 d1/a#1 2 d1/b#0 3 d1/b#1 4 d2/c#0 5 d2/c#1
    return Universe.from_columns(
        ["d2/c.cu3s", "d1/b.cu3s", "d1/a.cu3s", "d2/c.cu3s", "d1/a.cu3s", "d1/b.cu3s"], [1, 1, 0, 0, 1, 0]
    )


class TestResolveSplits:
    def test_stages_and_empty_predict_is_whole_universe(self, sessions: Universe) -> None:
        cfg = DataSplitConfig(
            train=(S(kind="stems", stems=["a"]),), val=(S(kind="files", paths=["d1/b.cu3s"]),),
            test=(S(kind="glob", pattern="d2/*"),),
        )
        out = resolve_splits(cfg, sessions)
        assert list(out) == ["train", "val", "test", "predict"]
        assert uids(out["train"]) == ["d1/a.cu3s#0", "d1/a.cu3s#1"]
        assert uids(out["val"]) == ["d1/b.cu3s#0", "d1/b.cu3s#1"]
        assert uids(out["test"]) == ["d2/c.cu3s#0", "d2/c.cu3s#1"]
        assert uids(out["predict"]) == sessions.uids()

    def test_explicit_predict_may_overlap(self, sessions: Universe) -> None:
        cfg = DataSplitConfig(
            train=(S(kind="dir_indices", ids=["0-3"]),), test=(S(kind="glob", pattern="d2/*"),),
            predict=(S(kind="glob", pattern="d2/*"), S(kind="dir_indices", ids=[0])),
        )
        out = resolve_splits(cfg, sessions)
        assert uids(out["predict"]) == ["d2/c.cu3s#0", "d2/c.cu3s#1", "d1/a.cu3s#0"]
        assert out["val"] == []

    def test_plain_list_returns_the_same_objects(self, sessions: Universe) -> None:
        ref_list = list(sessions)
        cfg = DataSplitConfig(train=(S(kind="dir_indices", ids=[5, 4]),), val=(S(kind="stems", stems=["a"]),))
        out = resolve_splits(cfg, ref_list)
        assert out["train"][0] is ref_list[5] and out["train"][1] is ref_list[4]
        assert all(a is b for a, b in zip(out["predict"], ref_list, strict=True))
        assert {k: uids(v) for k, v in out.items()} == {k: uids(v) for k, v in resolve_splits(cfg, sessions).items()}

    def test_uid_leakage_enforced(self, sessions: Universe) -> None:
        cfg = DataSplitConfig(train=(S(kind="all"),), test=(S(kind="dir_indices", ids=[0]),))
        with pytest.raises(SplitLeakageError, match="shared between train and test"):
            resolve_splits(cfg, sessions)

    def test_group_leakage_enforced(self, sessions: Universe) -> None:
        # Different frames of one recording in train and test: same group (the source).
        cfg = DataSplitConfig(
            train=(S(kind="file_indices", source="d1/a.cu3s", ids=[0]),),
            test=(S(kind="file_indices", source="d1/a.cu3s", ids=[1]),),
        )
        with pytest.raises(SplitLeakageError, match=r"1 group\(s\) in both train and test: 'd1/a.cu3s'"):
            resolve_splits(cfg, sessions)

    def test_leakage_warn_and_off(self, sessions: Universe, caplog) -> None:
        cfg = DataSplitConfig(train=(S(kind="all"),), val=(S(kind="stems", stems=["c"]),))
        with caplog.at_level(logging.WARNING):
            out = resolve_splits(cfg.with_leakage_check("warn"), sessions)
        assert len(out["val"]) == 2
        assert any("no_split_overlap violated" in m for m in warnings_of(caplog))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            resolve_splits(cfg.with_leakage_check("off"), sessions)
        assert warnings_of(caplog) == []

    def test_policy_read_from_splits_json(self, sessions: Universe) -> None:
        text = json.dumps({
            "train": [{"kind": "all"}], "test": [{"kind": "stems", "stems": ["c"]}], "leakage_check": "warn",
        })
        out = resolve_splits(loads_splits(text), sessions)
        assert len(out["train"]) == 6
        with pytest.raises(SplitLeakageError):
            resolve_splits(loads_splits(text.replace('"warn"', '"error"')), sessions)

    def test_other_constraints_enforced(self, sessions: Universe) -> None:
        cfg = DataSplitConfig(train=(S(kind="stems", stems=["a"]),), constraints=(Constraint("no_train_anomalous"),))
        with pytest.raises(SplitConstraintError, match="no_train_anomalous unavailable"):
            resolve_splits(cfg, sessions)

    def test_zero_match_names_stage(self, sessions: Universe) -> None:
        cfg = DataSplitConfig(train=(S(kind="all"),), test=(S(kind="stems", stems=["zzz"]),)).with_leakage_check("off")
        with pytest.raises(SelectorError, match=r"^test selector #0 \(kind 'stems'"):
            resolve_splits(cfg, sessions)

    def test_drifted_positional_split_refused_before_resolving(self, sessions: Universe) -> None:
        smaller = Universe.from_columns(["d1/a.cu3s"], [0])
        cfg = DataSplitConfig(universe_hash=smaller.hash, train=(S(kind="dir_indices", ids=[0]),))
        assert uids(resolve_splits(cfg, smaller)["train"]) == ["d1/a.cu3s#0"]
        with pytest.raises(UniverseDriftError, match="Re-run resolve-splits"):
            resolve_splits(cfg, sessions)
        with pytest.raises(UniverseDriftError):
            resolve_splits(cfg, list(sessions))
        # Drift is checked first: even an out-of-range position reports drift, not the index.
        far = DataSplitConfig(universe_hash=smaller.hash, train=(S(kind="dir_indices", ids=[99]),))
        with pytest.raises(UniverseDriftError):
            resolve_splits(far, sessions)

    def test_baked_split_survives_universe_growth(self, sessions: Universe) -> None:
        baked = DataSplitConfig(
            universe_hash=sessions.hash,
            train=(S(kind="file_indices", source="d1/a.cu3s", ids=["0-1"]),),
            test=(S(kind="files", paths=["d2/c.cu3s"]),),
        )
        assert baked.is_baked
        grown = Universe.from_columns(
            [*(r.source for r in sessions), "d0/new.cu3s"], [*(r.index for r in sessions), 0]
        )
        before, after = resolve_splits(baked, sessions), resolve_splits(baked, grown)
        for stage in ("train", "val", "test"):
            assert uids(before[stage]) == uids(after[stage])
        assert uids(after["predict"]) == grown.uids()

    def test_plan_splits_evaluates_without_enforcing(self, sessions: Universe) -> None:
        cfg = DataSplitConfig(train=(S(kind="dir_indices", ids=[0, 1, 2]),), test=(S(kind="dir_indices", ids=[2, 4]),))
        plan = plan_splits(cfg, sessions)
        assert not plan.leakage.ok
        assert plan.counts() == {"train": 3, "val": 0, "test": 2, "predict": 6}
        assert plan.group_counts() == {"train": 2, "val": 0, "test": 2, "predict": 3}
        assert plan.positions["test"].tolist() == [2, 4]
        table = plan.stage_table()
        assert table.num_rows == 11
        assert table.column("stage").to_pylist()[:3] == ["train"] * 3
        assert plan.drift.status == "unpinned"
        assert uids(plan.refs("test")) == ["d1/b.cu3s#0", "d2/c.cu3s#0"]
