"""Carts, price lists and RFQs of the B2B shop, and the sweeps that move them in time.

``tables`` declares them, ``rules`` says what they may hold and when each one
moves, ``sweep`` moves them (batched jobs on the workers), ``store`` is what the
API and the jobs call, ``cli`` is gatehouse-cart-abandonment-sweep.
"""

from gatehouse.sweeps.store import SweepStore
from gatehouse.sweeps.sweep import SWEEPS, Sweep, SweepRun

__all__ = ["SWEEPS", "Sweep", "SweepRun", "SweepStore"]
