"""A stand-in consumer of the split, so tests can observe whether downstream ran."""

from dagster import asset

from splits_assets import resolved_splits


@asset(deps=[resolved_splits])
def training_view() -> None:
    """Depends on the split; must not run when a blocking split check fails."""
