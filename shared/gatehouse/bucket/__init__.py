"""The per-(account, WB bucket) token bucket that keeps WB calls under WB's per-seller limits.

``reference`` holds the rule as a pure function; ``take.lua`` mirrors it on
Redis and ``store.RedisTokenBucket`` runs it.
"""

from gatehouse.bucket.reference import BucketState, TakeRequest, TakeResult, bucket_key, evaluate_bucket_take
from gatehouse.bucket.store import RedisTokenBucket

__all__ = [
    "BucketState",
    "RedisTokenBucket",
    "TakeRequest",
    "TakeResult",
    "bucket_key",
    "evaluate_bucket_take",
]
