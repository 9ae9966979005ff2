"""Job bodies, one module per domain. Importing this package registers them."""

from gatehouse_worker.jobs import autobidder, digitization, notifications, scheduled

__all__ = ["autobidder", "digitization", "notifications", "scheduled"]
