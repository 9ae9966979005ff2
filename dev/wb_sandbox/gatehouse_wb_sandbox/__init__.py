"""A local stand-in for the Wildberries seller API (gatehouse-wb-sandbox).

A workspace member of its own (dev/wb_sandbox), for development and tests
only: in neither Gatehouse image. WB's OpenAPI YAML (``openapi/``, vendored
unchanged) is its contract.

- ``server``: HTTP server and CLI (checks every route's sample answers at start: ``selfcheck``)
- ``gateway``: routing by host prefix, token and category, faults, rate limits, the request
  contract check, the log, per WB call
- ``routes``: (host, method, path) -> handler, bucket and error shapes; handlers in ``statistics``,
  ``promotion``, ``analytics``, ``content``, ``general`` (ping, seller-info); call plumbing in ``calls``
- ``contract``: the YAML's operations, request/response checks (openapi-core), limit tables
- ``data``: deterministic data per seller; ``limits``: token buckets over
  ``gatehouse.wb.limits`` (the client's table)
- ``faults``, ``log``, ``tokens`` (``make_token``, categories), ``problems`` (WB error bodies),
  ``state`` (config and mutable state), ``control`` (``/__sandbox/`` endpoints)
"""
