"""The settings of the small landing zone ``tests/landing``'s fixtures write (its
``curation.json``), for the tests that compare against them."""

#: The curation.json of the ``zone`` fixture: budgets the small corpus fills, and a three-way random split.
SETTINGS = {"segment_window": 10, "segment_stride": 5,
            "budget": {"train_hours": 0.02, "val_hours": 0.005, "test_hours": 0.005, "span_seconds": 30},
            "split": {"strategy": "random", "seed": 2, "val_ratio": 0.34, "test_ratio": 0.34}}
