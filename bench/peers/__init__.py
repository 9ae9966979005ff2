"""The peers' worker sides for bench_peers, one module each (a worker imports only its own system).

Each reads where its stores are from PEERS_DSN (PostgreSQL) or PEERS_REDIS_URL, and its trivial
body does as little as its system allows; a system without a durable done state (Celery, bare
Dramatiq) counts each job with one Redis INCR on PEERS_DONE_KEY.
"""
