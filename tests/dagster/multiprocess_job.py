"""A job whose steps run in processes of their own (Dagster's multiprocess executor), for the
landing zone resource's test: each step process opens the landing zone again. ``universe``
opens it first; ``edit_settings`` then rewrites ``curation.json`` (as a person might mid-run)
without opening it; ``reads_settings``, a step after it, opens it. The landing zone and storage
root come from ``KURATION_LANDING_ZONE`` and ``KURATION_STORAGE_ROOT``, as in the code
location. Built by :func:`edited_mid_run` so ``reconstructable`` can rebuild it in each step's
process."""

from __future__ import annotations

import json

from dagster import AssetSelection, Definitions, asset, define_asset_job, multiprocess_executor

from kuration_resources import LandingZoneResource, resources_from_env
from splits_assets import universe


@asset(deps=[universe])
def edit_settings(landing_zone: LandingZoneResource) -> None:
    with open(f"{landing_zone.url}/curation.json", "w", encoding="utf-8") as settings:
        json.dump({"workers": 2}, settings)


@asset(deps=[edit_settings])
def reads_settings(landing_zone: LandingZoneResource) -> None:
    landing_zone.open()


def edited_mid_run():
    job = define_asset_job("edited_mid_run", selection=AssetSelection.assets(universe, edit_settings, reads_settings)
                           .without_checks(), executor_def=multiprocess_executor)
    return Definitions(assets=[universe, edit_settings, reads_settings], jobs=[job],
                       resources=resources_from_env()).resolve_job_def("edited_mid_run")
