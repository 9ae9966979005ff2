"""The operators' one-shot commands, each its own composition root: gatehouse-search-reindex and
gatehouse-cart-abandonment-sweep queue work for the workers and follow it; gatehouse-prune and
gatehouse-rotate-keys do theirs in their own process."""
