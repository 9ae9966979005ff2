"""The operators' one-shot commands, each its own composition root: gatehouse-search-reindex and
gatehouse-cart-abandonment-sweep. They queue work for the workers and follow it."""
