"""Carts, price lists and RFQs of the B2B shop, and the sweeps that move them in time.

``tables`` declares them, ``rules`` says what they may hold and when each one
moves, ``sweep`` moves them (batched jobs on the workers), ``store`` holds their SQL,
``handlers`` the use cases the API, the jobs and gatehouse-cart-abandonment-sweep call.
"""

from gatehouse.sweeps.store import SweepStore
from gatehouse.sweeps.sweep import SWEEPS, Sweep, SweepRun

__all__ = ["SWEEPS", "Sweep", "SweepRun", "SweepStore"]
