"""The server's secrets: a key anyone could know is no secret. `serve` (and `worker`, for the
workers' key) refuses a missing, short or well-known one, saying how to make one; the embedded
default (SQLite) makes a random key on first start and keeps it, readable by the server only;
`compose.yaml` takes every secret from the environment and will not start without them."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from app.settings import Settings, SettingsError
from tests.support.cli import REPO
from tests.support.server import Server

MAKE_ONE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
UNREACHABLE_DATABASE = "postgresql+psycopg://ampquiz@127.0.0.1:1/ampquiz"
"""A PostgreSQL server that is not there: past the secret check, `serve` stops at once (status 1,
'cannot open the database') instead of serving, so a test sees how far it got."""

KNOWN = [
    "change-me-to-a-long-random-string",  # what compose.yaml shipped
    "changeme",
    "CHANGE_ME_before_going_live_with_this_server",
    "secret",
    "your-secret-key-here-make-it-long-and-random",
    "...",  # docs/scaling-out.md's example
    "k" * 40,  # repeated characters
    "abcd" * 12,  # a short block repeated
]


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The real command line in `cwd`, with these AMPQUIZ_* variables and no others."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AMPQUIZ_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, timeout=120,
        check=False, cwd=cwd, env={**clean, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip


def serve(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return cli("serve", "--processes", "1", cwd=cwd, **env)


def assert_refused(done: subprocess.CompletedProcess[str], variable: str) -> None:
    assert done.returncode == 2, done.stderr[-3000:]
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("ampquiz ")]
    assert variable in said and MAKE_ONE in said, said
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("key", ["", "too-short-a-key", *KNOWN])
def test_serve_refuses_a_missing_short_or_known_secret_key_on_a_shared_database(
    tmp_path: Path, key: str
) -> None:
    """On a database other than SQLite there is no file of its own to keep a key in, and every web
    host must sign with the same one: it must be given, and be a secret. It was taken as given
    (compose.yaml's `change-me-…`: anyone who read the file could sign any learner's cookie), and
    a missing one was made up in ./var, a different key on each host."""
    done = serve(tmp_path, AMPQUIZ_DATABASE_URL=UNREACHABLE_DATABASE, AMPQUIZ_SECRET_KEY=key)
    assert_refused(done, "AMPQUIZ_SECRET_KEY")
    assert not (tmp_path / "var").exists()


@pytest.mark.parametrize("key", ["changeme", "k" * 40])
def test_serve_refuses_a_known_secret_key_given_with_sqlite_too(tmp_path: Path, key: str) -> None:
    database = tmp_path / "data" / "ampquiz.db"
    database.mkdir(parents=True)  # a folder where the file should be: the database cannot be opened
    done = serve(tmp_path, AMPQUIZ_DATABASE_URL=f"sqlite:///{database}", AMPQUIZ_SECRET_KEY=key)
    assert_refused(done, "AMPQUIZ_SECRET_KEY")


def test_serve_takes_a_good_secret_key(tmp_path: Path) -> None:
    """A key made as the message says passes the check: serve goes on to the database."""
    done = serve(
        tmp_path,
        AMPQUIZ_DATABASE_URL=UNREACHABLE_DATABASE,
        AMPQUIZ_SECRET_KEY=secrets.token_urlsafe(32),
    )
    assert done.returncode == 1 and "cannot open the database" in done.stderr, done.stderr[-3000:]
    assert "AMPQUIZ_SECRET_KEY" not in done.stderr


def test_serve_serves_postgresql_with_a_good_secret_key(tmp_path: Path, postgres_url: str) -> None:
    server = Server(tmp_path)
    server.env.update(
        AMPQUIZ_DATABASE_URL=postgres_url, AMPQUIZ_SECRET_KEY=secrets.token_urlsafe(32)
    )
    server.start()
    try:
        assert httpx.get(server.url + "/healthz", timeout=10).json()["database"] is True
    finally:
        server.stop()
    assert not (tmp_path / "var").exists()  # no key made up beside a database that is not here


@pytest.mark.parametrize("key", ["change-me-to-a-long-random-string-of-40-chars", "w" * 43])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_known_workers_key_is_refused(tmp_path: Path, command: str, key: str) -> None:
    """AMPQUIZ_WORKERS_KEY signs what the web and the workers tell each other over NATS: one long
    enough but known (a placeholder, repeated characters) lets anyone who can publish there forge
    runs and results. It was taken: the worker started its sandbox pool, then looked for NATS."""
    env = {"AMPQUIZ_WORKERS_URL": "nats://127.0.0.1:1", "AMPQUIZ_WORKERS_KEY": key,
           "AMPQUIZ_DATABASE_URL": UNREACHABLE_DATABASE, "AMPQUIZ_SECRET_KEY": secrets.token_urlsafe(32)}  # fmt: skip
    args = ("serve", "--processes", "1") if command == "serve" else ("worker", "--slots", "1")
    assert_refused(cli(*args, cwd=tmp_path, **env), "AMPQUIZ_WORKERS_KEY")


# ---- the embedded default: a random key, made once and kept --------------------------------


def test_the_embedded_default_makes_a_random_key_kept_for_the_server_only(tmp_path: Path) -> None:
    first = Settings.from_env(
        {"AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path}/a/ampquiz.db"}
    ).resolved_secret_key()
    other = Settings.from_env(
        {"AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path}/b/ampquiz.db"}
    ).resolved_secret_key()
    assert first != other and len(first) >= 43 and len(set(first)) > 16  # secrets.token_urlsafe(32)
    kept = tmp_path / "a" / "secret_key"
    assert kept.stat().st_mode & 0o777 == 0o600
    # a restart reads it back
    again = Settings.from_env({"AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path}/a/ampquiz.db"})
    assert again.resolved_secret_key() == first
    assert again.secret_key_problem() is None


def test_a_kept_key_others_can_read_is_made_the_servers_alone(tmp_path: Path) -> None:
    """A key file copied into place (a restore from a backup, say) with the usual 0644: anyone on
    the host could read the key, and sign any learner's cookie. It is kept, made 0600."""
    (tmp_path / "secret_key").write_text(secrets.token_urlsafe(32) + "\n")
    os.chmod(tmp_path / "secret_key", 0o644)
    Settings.from_env(
        {"AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path}/ampquiz.db"}
    ).resolved_secret_key()
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600


def test_serve_refuses_a_known_key_written_into_the_kept_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "ampquiz.db").mkdir(parents=True)  # the database cannot be opened: serve stops there
    (data / "secret_key").write_text("changeme\n")
    done = serve(tmp_path, AMPQUIZ_DATABASE_URL=f"sqlite:///{data / 'ampquiz.db'}")
    assert_refused(done, str(data / "secret_key"))


def test_a_public_url_must_be_an_http_or_https_address() -> None:
    assert (
        Settings.from_env({"AMPQUIZ_PUBLIC_URL": "https://quiz.example.edu/"}).public_url
        == "https://quiz.example.edu"
    )
    for bad in (
        "quiz.example.edu",
        "ftp://quiz.example.edu",
        "https://",
        "https://quiz.example.edu/?a=b",
    ):
        with pytest.raises(SettingsError, match="AMPQUIZ_PUBLIC_URL"):
            Settings.from_env({"AMPQUIZ_PUBLIC_URL": bad})


# ---- compose.yaml: every secret from the environment ---------------------------------------

SECRET_NAME = re.compile(r"KEY|SECRET|PASSWORD|TOKEN", re.IGNORECASE)
REQUIRED = re.compile(r"\$\{(?P<name>[A-Z_][A-Z0-9_]*):\?(?P<message>[^}]+)\}")
URL_PASSWORD = re.compile(r"://[^/@\s:]+:(?P<password>\$\{[^}]*\}|[^@\s/]*)@")
"""The password in a URL's `USER:PASSWORD@`, a variable's (whose message may hold spaces) or a literal."""


def compose_environment() -> list[tuple[str, str, str]]:
    """(service, variable, value) for every variable compose.yaml sets."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    found = []
    for service, spec in compose["services"].items():
        env = spec.get("environment") or {}
        if isinstance(env, list):  # the `- NAME=value` form
            env = dict(item.partition("=")[::2] for item in env)
        found += [(service, name, str(value)) for name, value in env.items()]
    return found


def test_compose_takes_every_secret_from_the_environment_and_refuses_to_start_without_it() -> None:
    """`${VAR:?message}` makes `docker compose up` stop with the message while VAR is unset or
    empty; a literal (`change-me-…`, `ampquiz`) is a secret everyone who read the file knows, and
    a default (`${VAR:-x}`) one that is used whenever the operator forgot."""
    environment = compose_environment()
    secret_vars = [(s, n, v) for s, n, v in environment if SECRET_NAME.search(n)]
    assert {n for _, n, _ in secret_vars} >= {
        "AMPQUIZ_SECRET_KEY",
        "AMPQUIZ_WORKERS_KEY",
        "POSTGRES_PASSWORD",
    }
    for service, name, value in secret_vars:
        assert REQUIRED.fullmatch(value), (
            f"{service}: {name} is {value!r}, not ${{VAR:?why it is needed}}"
        )
    urls = [(s, n, v) for s, n, v in environment if "://" in v]
    assert any(n == "AMPQUIZ_DATABASE_URL" for _, n, _ in urls)
    for service, name, value in urls:
        for found in URL_PASSWORD.finditer(value):
            assert REQUIRED.fullmatch(found["password"]), (
                f"{service}: {name} holds a literal password"
            )
    # The postgres service's password and the web's database URL are one variable.
    by_name = {n: v for _, n, v in environment}
    (in_url,) = [m["password"] for m in URL_PASSWORD.finditer(by_name["AMPQUIZ_DATABASE_URL"])]
    assert (
        REQUIRED.fullmatch(in_url)["name"]
        == REQUIRED.fullmatch(by_name["POSTGRES_PASSWORD"])["name"]
    )  # type: ignore[index]


def test_compose_holds_no_literal_password_anywhere() -> None:
    text = (REPO / "compose.yaml").read_text()
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        if SECRET_NAME.search(code.partition(":")[0]) and ":" in code:
            value = code.partition(":")[2].strip().strip("'\"")
            assert not value or REQUIRED.fullmatch(value), line
    assert "change-me" not in text.lower()
