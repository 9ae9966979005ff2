"""A local stand-in for the Wildberries seller API (gatehouse-wb-sandbox).

A workspace member of its own (dev/wb_sandbox), for development and tests
only: in neither Gatehouse image.

- ``server``: HTTP server and CLI; ``gateway``: token, faults, rate limits, log per WB call
- ``routes``: (method, path) -> handler and bucket; handlers in ``statistics``,
  ``promotion``, ``analytics``, ``content``; shared call plumbing in ``calls``
- ``data``: deterministic data per seller; ``limits``: token buckets over
  ``gatehouse.wb.limits`` (the client's table)
- ``faults``, ``log``, ``tokens`` (``make_token``), ``problems`` (WB error bodies),
  ``state`` (config and mutable state), ``control`` (``/__sandbox/`` endpoints)
"""
