"""Job bodies, one module per domain. Importing this package registers them."""

from gatehouse_worker.jobs import (
    accounts,
    autobidder,
    catalog,
    digitization,
    fanouts,
    maintenance,
    notifications,
    scheduled,
    sweeps,
    webhooks,
)

__all__ = [
    "accounts",
    "autobidder",
    "catalog",
    "digitization",
    "fanouts",
    "maintenance",
    "notifications",
    "scheduled",
    "sweeps",
    "webhooks",
]
