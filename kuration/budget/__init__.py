"""The hours-as-budget fill: which spans of which tracks each split admits, and why.

:func:`plan_budget` turns scored segments into a :class:`BudgetPlan` (items, decisions and
the budget block); :func:`validate_budget_plan` checks a plan's contract;
:func:`hours_selection_review` explains one; `kuration.budget.plan_store` keeps one under
a storage root.
"""

from typing import TYPE_CHECKING

from kuration.errors import BudgetError
from kuration.lazy_exports import type_checking_exports

if TYPE_CHECKING:
    from kuration.budget.fill import ADMITTED_REASONS, REASONS
    from kuration.budget.options import BudgetOptions, ShardChunking
    from kuration.budget.plan import BudgetPlan, plan_budget
    from kuration.budget.review import SelectionReview, hours_selection_review
    from kuration.budget.validation import BudgetValidation, validate_budget_plan
    from kuration.budget.split_pools import SplitPools, pools_from_assignments, seeded_pools

__getattr__ = type_checking_exports(__name__, __file__)

__all__ = [
    "ADMITTED_REASONS", "BudgetError", "BudgetOptions", "BudgetPlan", "REASONS", "ShardChunking", "SplitPools",
    "BudgetValidation", "SelectionReview", "hours_selection_review", "plan_budget", "pools_from_assignments",
    "seeded_pools", "validate_budget_plan",
]
