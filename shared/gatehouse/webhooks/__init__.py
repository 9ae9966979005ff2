"""Webhooks: domain events to signed HTTP deliveries, retried, dead-lettered, replayable.

- ``store``: endpoints, the outbox (an event-bus subscriber writing deliveries and
  their ``webhook.deliver`` jobs in the raising transaction), attempts, replays;
- ``signing``: Standard Webhooks v1 signatures and the receivers' ``verify``;
- ``safety``: the SSRF rules every target URL passes, at creation and at each attempt;
- ``sender``: one HTTP attempt (httpx); ``slots``: per-endpoint concurrency in Redis.

The attempts themselves are the job body gatehouse_worker.jobs.webhooks.
"""

from gatehouse.webhooks.signing import SignatureInvalid, verify

__all__ = ["SignatureInvalid", "verify"]
