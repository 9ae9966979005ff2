"""`make run`: all of Gatehouse on one machine.

With DATABASE_URL / REDIS_URL unset it starts embedded PostgreSQL and Redis
with their data under ./var (a second run finds it again); with them set it
uses those servers. Then it migrates and starts the WB sandbox, the API
(BACKEND_ROLE=all: HTTP plus in-process consumers) and the scheduler, prints
the URL and the admin token, and on Ctrl-C stops everything in order. With
SMTP_URL unset it also runs a local SMTP sink (dev/mail_sink.py) that writes
every notification e-mail under ./var/mail. Webhooks may target this machine
(WEBHOOK_ALLOWED_HOSTS defaults to loopback here).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from embedded import EmbeddedUnavailable, start_postgres, start_redis, stop_redis
from mail_sink import MailSink

from gatehouse.crypto import generate_key
from gatehouse.entrypoint import settings_or_exit

BIN = Path(sys.executable).parent


def kept_secret(path: Path, configured: SecretStr | None, generate: Callable[[], str]) -> str:
    """The configured secret, else the one generated into ./var by an earlier run, else a new one."""
    if configured:
        return configured.get_secret_value()
    if not path.exists():
        path.write_text(generate())
        path.chmod(0o600)
    return path.read_text().strip()


def seed_demo_account(env: dict[str, str]) -> None:
    """On the sandbox, a first run gets one seller account, so the scheduled syncs have work out of the box."""
    from gatehouse.composition import bootstrap
    from gatehouse.settings import load_settings

    gh = bootstrap(
        load_settings(**{k.lower(): env[k] for k in ("DATABASE_URL", "REDIS_URL", "TOKEN_ENCRYPTION_KEY")})
    )
    try:
        if not gh.accounts.active_ids():
            account = gh.account_handlers.create_account("Демо-кабинет", "demo-seller")
            print(f"demo account:     {account.id} (WB sandbox seller demo-seller)")
    finally:
        gh.close()


def wait_ready(url: str, procs: list[tuple[str, subprocess.Popen]], stop: threading.Event) -> bool:
    """Until the API says ready; False if a child died or we were interrupted first."""
    while not stop.wait(0.2):
        for name, proc in procs:
            if proc.poll() is not None:
                print(f"make run: {name} exited with {proc.returncode}", file=sys.stderr)
                return False
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
    return False


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--var", default="var", help="data directory of the embedded servers (default ./var)")
    args = parser.parse_args()
    var = Path(args.var).resolve()
    var.mkdir(parents=True, exist_ok=True)
    settings = settings_or_exit("make run", require=())

    env = dict(os.environ)
    redis_proc = None
    try:
        if not settings.database_url:
            env["DATABASE_URL"] = start_postgres(var)
            print(f"embedded PostgreSQL: {var / 'pg'}")
        if not settings.redis_url:
            env["REDIS_URL"], redis_proc = start_redis(var)
            print(f"embedded Redis:      {var / 'redis'}")
    except EmbeddedUnavailable as exc:
        print(f"make run: {exc}", file=sys.stderr)
        return 1
    env["ADMIN_TOKEN"] = kept_secret(
        var / "admin-token", settings.admin_token, lambda: secrets.token_urlsafe(24)
    )
    env["TOKEN_ENCRYPTION_KEY"] = kept_secret(var / "token-key", settings.token_encryption_key, generate_key)
    env.setdefault("BACKEND_ROLE", "all")
    # A webhook receiver on this machine (a developer's own) is allowed here, and only here.
    env.setdefault("WEBHOOK_ALLOWED_HOSTS", "127.0.0.1,::1,localhost")
    sandbox_url = f"http://{settings.wb_sandbox_bind}"
    if not settings.wb_api_base_url:
        env["WB_API_BASE_URL"] = sandbox_url

    subprocess.run([BIN / "gatehouse-migrate"], env=env, check=True)
    if not settings.wb_api_base_url:
        seed_demo_account(env)
    procs: list[tuple[str, subprocess.Popen]] = []

    def spawn(name: str, *cmd: str) -> None:
        # Own session: Ctrl-C reaches this launcher only, which stops the children in order.
        procs.append((name, subprocess.Popen([str(BIN / cmd[0]), *cmd[1:]], env=env, start_new_session=True)))

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    exit_code = 0
    mail_sink = None
    try:
        if not settings.smtp_url:
            mail_sink = MailSink(var).start()
            env["SMTP_URL"] = mail_sink.url
            print(f"mail sink:           {mail_sink.url} → {mail_sink.directory}")
        spawn("wb-sandbox", "gatehouse-wb-sandbox", "--bind", settings.wb_sandbox_bind)
        spawn("api", "gatehouse-api", "--bind", settings.api_bind)
        spawn("scheduler", "gatehouse-scheduler")
        host, port = settings.api_bind.rsplit(":", 1)
        url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
        if not wait_ready(url, procs, stop):
            return 1
        print(
            f"\nGatehouse is up:  {url}   (readiness: {url}/readyz)\n"
            f"admin token:      {env['ADMIN_TOKEN']}\n"
            f"WB API:           {env['WB_API_BASE_URL']}\n"
            f"DATABASE_URL:     {env['DATABASE_URL']}\n"
            f"REDIS_URL:        {env['REDIS_URL']}\n"
            f"SMTP_URL:         {env['SMTP_URL']}"
            f"{f'   (each e-mail is a file under {mail_sink.directory})' if mail_sink else ''}\n"
            "Ctrl-C stops everything.\n",
            flush=True,
        )
        while not stop.wait(0.5):
            dead = [(name, p.returncode) for name, p in procs if p.poll() is not None]
            if dead:
                print(f"make run: {dead[0][0]} exited with {dead[0][1]}; stopping", file=sys.stderr)
                exit_code = 1
                break
    finally:
        print("stopping…", flush=True)
        for _, proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        for name, proc in reversed(procs):
            try:
                proc.wait(timeout=settings.shutdown_timeout_ms / 1000 + 15)
            except subprocess.TimeoutExpired:
                print(f"{name} did not stop in time; killing it", file=sys.stderr)
                proc.kill()
        if mail_sink is not None:
            mail_sink.stop()
        if redis_proc is not None:
            stop_redis(var)
            redis_proc.wait(timeout=10)
        # Embedded PostgreSQL stops when this process exits (pgserver's atexit).
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
