"""A local stand-in for the Wildberries seller API (gatehouse-wb-sandbox).

- ``server``: HTTP server and CLI; ``gateway``: token, faults, rate limits, log per WB call
- ``routes``: (method, path) -> handler and bucket; handlers in ``statistics``,
  ``promotion``, ``analytics``, ``content``; shared call plumbing in ``calls``
- ``data``: deterministic data per seller; ``limits``: ``WB_LIMITS`` and token buckets
- ``faults``, ``log``, ``tokens`` (``make_token``), ``problems`` (WB error bodies),
  ``state`` (config and mutable state), ``control`` (``/__sandbox/`` endpoints)
"""
