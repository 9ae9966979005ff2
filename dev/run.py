"""`make run`: all of Gatehouse on one machine.

With DATABASE_URL / REDIS_URL unset it starts embedded PostgreSQL and Redis
with their data under ./var (a second run finds it again); with them set it
uses those servers. Then it migrates and starts the WB sandbox, the API
(BACKEND_ROLE=all: HTTP plus in-process consumers) and the scheduler, prints
the URL and the admin token, and on Ctrl-C stops everything in order. With
SMTP_URL unset it also runs a local SMTP sink (dev/mail_sink.py) that writes
every notification e-mail under ./var/mail. Webhooks may target this machine
(WEBHOOK_ALLOWED_HOSTS defaults to loopback here).

Its ports (API_HOST:API_PORT, default 127.0.0.1:8000; 127.0.0.1:WB_SANDBOX_PORT,
8081; 127.0.0.1:MAIL_SINK_PORT, 1025) are bound here before anything starts: a
busy one stops it at once, naming the setting that moves it. The API and the
sandbox inherit their listening sockets (``--bind fd://N``), so what answers on
them is this run's children and nothing else.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from embedded import EmbeddedUnavailable, start_postgres, start_redis, stop_redis
from mail_sink import MailSink, port_free

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
        if not gh.accounts.active_ids(limit=1):
            account = gh.account_handlers.create_account("Демо-кабинет", "demo-seller")
            print(f"demo account:     {account.id} (WB sandbox seller demo-seller)")
    finally:
        gh.close()


class PortBusy(Exception):
    pass


def busy(host: str, port: int, setting: str, exc: OSError | None = None) -> PortBusy:
    reason = f" ({exc.strerror})" if exc is not None and exc.strerror else ""
    return PortBusy(
        f"port {port} on {host} is already in use{reason}: stop what listens there, "
        f"or set {setting} to a free port"
    )


def listen(host: str, port: int, setting: str) -> socket.socket:
    """A listening socket of ours on host:port, for a child to inherit; PortBusy if it is taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn: a TIME_WAIT is no conflict
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise busy(host, port, setting, exc) from None
    sock.set_inheritable(True)
    return sock


def http_url(host: str, port: int) -> str:
    """The URL this machine reaches host:port at (a wildcard address is reached on loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# What a command run by hand needs to act on this run (`set -a; . var/make-run.env; set +a`).
SHARED_SETTINGS = (
    "DATABASE_URL",
    "REDIS_URL",
    "ADMIN_TOKEN",
    "CONSOLE_SECRET",
    "TOKEN_ENCRYPTION_KEY",
    "WB_API_BASE_URL",
    "SMTP_URL",
    "PUBLIC_URL",
)


def write_env_file(path: Path, env: dict[str, str]) -> None:
    path.unlink(missing_ok=True)
    path.touch(mode=0o600)  # it holds the admin token: never readable by others, not even for a moment
    path.write_text("".join(f"{name}={shlex.quote(env[name])}\n" for name in SHARED_SETTINGS if name in env))


def wait_ready(checks: list[str], procs: list[tuple[str, subprocess.Popen]], stop: threading.Event) -> bool:
    """Until every URL of ``checks`` answers 200; False if a child died or we were interrupted first.

    The sockets behind them are this run's (``listen``): an answer comes from our child.
    """
    pending = list(checks)
    while not stop.wait(0.2):
        for name, proc in procs:
            if proc.poll() is not None:
                print(f"make run: {name} exited with {proc.returncode}", file=sys.stderr)
                return False
        try:
            while pending and httpx.get(pending[0], timeout=2).status_code == 200:
                pending.pop(0)
        except httpx.HTTPError:
            pass
        if not pending:
            return True
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

    # Every port first: a busy one stops the run before anything starts.
    sockets: dict[str, socket.socket] = {}
    try:
        sockets["api"] = listen(settings.api_host, settings.api_port, "API_PORT")
        if not settings.wb_api_base_url:
            sockets["wb-sandbox"] = listen("127.0.0.1", settings.wb_sandbox_port, "WB_SANDBOX_PORT")
        if not settings.smtp_url and not port_free(settings.mail_sink_port):
            raise busy("127.0.0.1", settings.mail_sink_port, "MAIL_SINK_PORT")
    except PortBusy as exc:
        print(f"make run: {exc}", file=sys.stderr)
        for sock in sockets.values():
            sock.close()
        return 1

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
    env["CONSOLE_SECRET"] = kept_secret(
        var / "console-secret", settings.console_secret, lambda: secrets.token_urlsafe(32)
    )
    env["TOKEN_ENCRYPTION_KEY"] = kept_secret(var / "token-key", settings.token_encryption_key, generate_key)
    # The console is served over plain http here: a Secure cookie would never come back.
    env.setdefault("SESSION_COOKIE_SECURE", "false")
    env.setdefault("BACKEND_ROLE", "all")
    # A webhook receiver on this machine (a developer's own) is allowed here, and only here.
    env.setdefault("WEBHOOK_ALLOWED_HOSTS", "127.0.0.1,::1,localhost")
    if not settings.wb_api_base_url:
        env["WB_API_BASE_URL"] = http_url("127.0.0.1", settings.wb_sandbox_port)

    subprocess.run([BIN / "gatehouse-migrate"], env=env, check=True)
    if not settings.wb_api_base_url:
        seed_demo_account(env)
    procs: list[tuple[str, subprocess.Popen]] = []

    def spawn(name: str, *cmd: str) -> None:
        # Own session: Ctrl-C reaches this launcher only, which stops the children in order.
        # A child given its socket (--bind fd://N) owns it from then on: ours is closed.
        sock = sockets.pop(name, None)
        argv = [str(BIN / cmd[0]), *cmd[1:], *(["--bind", f"fd://{sock.fileno()}"] if sock else [])]
        pass_fds = (sock.fileno(),) if sock else ()
        procs.append((name, subprocess.Popen(argv, env=env, start_new_session=True, pass_fds=pass_fds)))
        if sock:
            sock.close()

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    exit_code = 0
    mail_sink = None
    env_file = var / "make-run.env"
    try:
        if not settings.smtp_url:
            try:
                mail_sink = MailSink(var, settings.mail_sink_port).start()
            except OSError as exc:  # taken since the check above
                print(
                    f"make run: {busy('127.0.0.1', settings.mail_sink_port, 'MAIL_SINK_PORT', exc)}",
                    file=sys.stderr,
                )
                return 1
            env["SMTP_URL"] = mail_sink.url
            print(f"mail sink:           {mail_sink.url} → {mail_sink.directory}")
        checks = []
        if "wb-sandbox" in sockets:
            spawn("wb-sandbox", "gatehouse-wb-sandbox")
            checks.append(f"{env['WB_API_BASE_URL']}/__sandbox/health")  # /ping wants a token
        url = http_url(settings.api_host, settings.api_port)
        if "PUBLIC_URL" not in os.environ:
            env["PUBLIC_URL"] = url  # the e-mails' links point at this run's console
        spawn("api", "gatehouse-api")
        spawn("scheduler", "gatehouse-scheduler")
        if not wait_ready([*checks, f"{url}/readyz"], procs, stop):
            return 1
        write_env_file(env_file, env)
        print(
            f"\nGatehouse is up:  {url}   (readiness: {url}/readyz)\n"
            f"admin token:      {env['ADMIN_TOKEN']}\n"
            f"WB API:           {env['WB_API_BASE_URL']}\n"
            f"DATABASE_URL:     {env['DATABASE_URL']}\n"
            f"REDIS_URL:        {env['REDIS_URL']}\n"
            f"SMTP_URL:         {env['SMTP_URL']}"
            f"{f'   (each e-mail is a file under {mail_sink.directory})' if mail_sink else ''}\n"
            f"commands by hand: set -a; . {env_file}; set +a   (these settings, for gatehouse-* commands)\n"
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
        env_file.unlink(missing_ok=True)
        for sock in sockets.values():
            sock.close()
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
