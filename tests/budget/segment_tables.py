"""Hand-written scored segment tables for the budget tests: each segment is a tuple, so a
test reads like the corpus it describes."""

from __future__ import annotations

import math

import pyarrow as pa

from kuration.scoring.strategy import Strategy

FEATURE = "speed.mean"


def segment_columns(feature: str = FEATURE) -> dict[str, list]:
    """Empty columns of the stored segment-table layout, with one feature column."""
    return {k: [] for k in ("source_id", "entity_id", "segment_index", "start", "stop", "start_tick", "stop_tick",
                            "seconds", "present_fraction", "track_steps", "sample_hz", feature, "tags", "priority",
                            "passed")}


def add_segment(cols: dict[str, list], *, source: str, entity: str, index: int, start: int, stop: int, steps: int,
                hz: float, feature: str, value: float, tags, priority: float) -> None:
    """One fully present segment (ticks are steps); passed unless its priority is -inf."""
    for name, item in (("source_id", source), ("entity_id", entity), ("segment_index", index), ("start", start),
                       ("stop", stop), ("start_tick", start), ("stop_tick", stop), ("seconds", (stop - start) / hz),
                       ("present_fraction", 1.0), ("track_steps", steps), ("sample_hz", hz), (feature, value),
                       ("tags", list(tags)), ("priority", priority), ("passed", priority != -math.inf)):
        cols[name].append(item)


def columns_table(cols: dict[str, list]) -> pa.Table:
    types = {"segment_index": pa.int64(), "start": pa.int64(), "stop": pa.int64(), "start_tick": pa.int64(),
             "stop_tick": pa.int64(), "track_steps": pa.int64(), "tags": pa.list_(pa.string())}
    return pa.table({k: pa.array(v, type=types.get(k)) for k, v in cols.items()})


def segments_table(rows: list[tuple], *, hz: float = 10.0) -> pa.Table:
    """``rows``: ``(source, entity, start, stop, track_steps, priority, tags)`` or with a
    trailing feature value (default: the priority, NaN for -inf)."""
    cols = segment_columns()
    index: dict[tuple[str, str], int] = {}
    for row in rows:
        source, entity, start, stop, steps, priority, tags = row[:7]
        feature = row[7] if len(row) > 7 else (priority if math.isfinite(priority) else math.nan)
        key = (source, entity)
        add_segment(cols, source=source, entity=entity, index=index.setdefault(key, 0), start=start, stop=stop,
                    steps=steps, hz=hz, feature=FEATURE, value=feature, tags=tags, priority=priority)
        index[key] += 1
    return columns_table(cols)


def strategy(method: str = "inclusion", *, tags=("a", "b", "rare"), tag_coverage=False, min_tag_frac=0.0,
             max_group_overshoot=None) -> Strategy:
    data = {"method": method, "priority": {FEATURE: 1.0}, "tags": list(tags),
            "selection": {"tag_coverage": tag_coverage, "min_tag_frac": min_tag_frac,
                          "max_group_overshoot": max_group_overshoot}}
    if method == "filter":
        data["predicates"] = [{"feature": FEATURE, "op": ">", "value": 0.0}]
    return Strategy.from_dict(data)


def assignments(stage_of: dict[str, str], group_of: dict[str, str] | None = None) -> pa.Table:
    """A split_assignments table with one sample per source."""
    sources = sorted(stage_of)
    return pa.table({
        "stage": [stage_of[s] for s in sources], "uid": [f"{s}#0" for s in sources], "source": sources,
        "index": [0] * len(sources), "group": [(group_of or {}).get(s, s) for s in sources],
        "position": list(range(len(sources))),
    })


def by_id(plan, column: str) -> dict[tuple, object]:
    items = plan.items
    keys = zip(items.column("source_id").to_pylist(), items.column("entity_id").to_pylist(),
               items.column(plan.index_column).to_pylist(), strict=True)
    return dict(zip(keys, items.column(column).to_pylist(), strict=True))
