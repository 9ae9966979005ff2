"""Talking to the Wildberries seller API: one client, its errors, per-account rate limiting."""
