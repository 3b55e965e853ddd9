"""The server's settings, declared once: each has a default, help text and an `AMPQUIZ_*` variable.

Read from the environment by `Settings.from_env()`; `ampquiz serve --help` and the README's table
list them all (a test checks the README names every one). Nothing here is read at import time, so
tests build as many variants of the app as they like.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

_PLAIN_SQLITE_URL = re.compile(r"sqlite(?:\+pysqlite)?:///([^?#%]+)")
"""`sqlite:///path` with nothing SQLAlchemy's URL parser would have to decode or split off."""

ENV_PREFIX = "AMPQUIZ_"
SECRET_FILE = "secret_key"
CHECKOUT_BANK = Path(__file__).resolve().parent.parent / "questions"
"""The bank of the checkout this code runs from (there is none beside an installed wheel)."""
MIN_WORKERS_KEY_CHARS = 32
"""As long as `secrets.token_urlsafe(32)` makes (43 characters): a short key could be guessed
offline from one captured message."""
MIN_SECRET_KEY_CHARS = 32
"""The same for the key that signs learners' cookies: one cookie is enough to guess it offline."""
MAKE_A_SECRET = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
KNOWN_SECRETS = frozenset({"secret", "secretkey", "password", "changeme", "test", "ampquiz"})
"""Whole values (letters and digits only, lower-cased) that are no secret."""
PLACEHOLDER_PARTS = (
    "changeme", "changethis", "changeit", "replaceme", "replacethis", "placeholder", "yoursecret",
    "yourkey", "yourown", "longrandom", "randomstring", "notasecret", "supersecret", "example",
)  # fmt: skip
"""What placeholders are made of (compose.yaml shipped `change-me-to-a-long-random-string`); no
random key of 32 characters or more holds one of them by chance."""


def weak_secret(value: str, min_chars: int) -> str | None:
    """Why `value` is no secret, to follow its variable's name in a message; None when it may be
    one. It cannot tell a random key from a made-up one: it refuses what is missing, short, a
    placeholder (ours included) or a few characters repeated."""
    if not value:
        return "is not set"
    if len(value) < min_chars:
        return f"is shorter than {min_chars} characters, which could be guessed"
    plain = re.sub(r"[^a-z0-9]", "", value.lower())
    if plain in KNOWN_SECRETS or any(part in plain for part in PLACEHOLDER_PARTS):
        return "is a placeholder, known to whoever read where it came from"
    repeats = any(value[p:] == value[:-p] for p in range(1, len(value) // 2 + 1))
    if repeats or len(set(value)) < 8:
        return "is a few characters repeated, which could be guessed"
    return None


class SettingsError(ValueError):
    """A setting read from the environment is malformed; the message names the variable."""


DEPLOYMENT_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def deployment_name(workers_url: str) -> str:
    """The deployment's name in a `nats://HOST:PORT/NAME` URL's path ('' when it has none), which
    keeps deployments sharing a NATS server apart (`app.runs.jetstream.Layout`); ValueError for
    a path that is not a name: it is one token of a NATS subject, and part of a stream's name."""
    name = urlsplit(workers_url).path.strip("/")
    if name and not DEPLOYMENT_NAME.fullmatch(name):
        raise ValueError(
            f"names the deployment {name!r} in its path: a name is 1 to 32 letters, digits, '-' or '_' "
            "(nats://HOST:PORT/NAME, to share the NATS server with other deployments)"
        )
    return name


class Settings(BaseModel):
    """Everything the server can be told. Field descriptions are the help text users read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = Field(
        "sqlite:///var/ampquiz.db",
        description="SQLAlchemy URL of the database; the default SQLite file is relative to the "
        "working directory, and its folder is created.",
    )
    bank: Path = Field(
        Path("questions"),
        description="Folder (or one file) of question-set YAML files; reloaded when a file changes. "
        "Unset, where the working folder has no `questions`, `serve` takes the project's own (a "
        "checkout's); set to a folder that is not there, `serve` stops and says where it looked.",
    )
    secret_key: str | None = Field(
        None,
        description="Key that signs the learner and studio cookies. With SQLite, by default made "
        "once at random and kept in a `secret_key` file next to the database (readable by the "
        "server only), so cookies survive restarts. With any other database it must be given, the "
        f"same to every web host; `serve` refuses one shorter than {MIN_SECRET_KEY_CHARS} "
        "characters, a placeholder or a few characters repeated (make one with "
        f"`{MAKE_A_SECRET}`).",
    )
    sandbox_workers: int = Field(
        2,
        ge=1,
        le=64,
        description="Snippets that run at once; one more warm sandbox process than this is kept prepared.",
    )
    run_queue: int = Field(
        16,
        ge=0,
        le=1000,
        description="Runs that may wait for a free worker, which goes to the waiting run whose address (then learner) "
        "has the fewest runs on workers; beyond workers + queue a run gets 429 with Retry-After.",
    )
    run_per_learner: int = Field(
        2,
        ge=1,
        le=100,
        description="Runs one learner (cookie) may have running or waiting at once; "
        "beyond it their next run gets 429. The runs shown with answered questions do not count.",
    )
    run_per_address: int = Field(
        8,
        ge=1,
        le=1000,
        description="Runs one client address may have running or waiting at once "
        "(a client that throws its cookie away is still one address).",
    )
    answers_per_minute: int = Field(
        60,
        ge=0,
        le=100_000,
        description="Answers one learner (cookie) may send in a minute, in bursts of as many; "
        "beyond it an answer gets 429 with Retry-After. 0: no limit.",
    )
    answers_per_minute_per_address: int = Field(
        600,
        ge=0,
        le=1_000_000,
        description="Answers one client address may send in a minute (a client that "
        "throws its cookie away is still one address; a class behind one NAT shares it). 0: no limit.",
    )
    max_code_bytes: int = Field(
        20_000, ge=100, description="Largest snippet accepted, in bytes (beyond: 413)."
    )
    run_wall_s: float = Field(
        10.0, gt=0, le=300, description="Wall-time limit of one snippet run, in seconds."
    )
    workers_url: str = Field(
        "",
        description="Where snippets run. Empty: a sandbox pool inside the server (the default). "
        "`nats://HOST:PORT`: sandbox workers on other machines (`ampquiz worker`, same variable), "
        "fed through NATS JetStream; the server then starts no sandbox and may run as several "
        "processes. `nats://HOST:PORT/NAME`: the same, for one of several deployments sharing "
        "that NATS server. The NATS server must know who connects: give this role's user and "
        "password (`nats://USER:PASSWORD@HOST:PORT`, URL-safe characters), a token "
        "(`nats://TOKEN@HOST:PORT`) or `AMPQUIZ_WORKERS_CREDS`; `serve` and `worker` refuse a "
        "URL without, unless `AMPQUIZ_BROKER_INSECURE` allows it. `tls://…`: the same, over TLS. "
        "(`unix://PATH` is what `serve --processes` uses between its own processes.)",
    )
    workers_key: str = Field(
        "",
        validate_default=True,
        description="Secret shared by the web and every `ampquiz worker` when "
        "`AMPQUIZ_WORKERS_URL` is `nats://…`: it signs run requests, results and worker "
        f"announcements, so nobody else who can publish on the NATS server can forge them. At "
        f"least {MIN_WORKERS_KEY_CHARS} characters, the same everywhere; required in that mode.",
    )
    workers_creds: str = Field(
        "",
        description="A NATS credentials file, instead of a user and password in "
        "`AMPQUIZ_WORKERS_URL`: a `.creds` file (JWT and NKey seed) or an NKey seed file, for the "
        "web's or the worker's user (needs the `nkeys` package).",
    )
    broker_insecure: bool = Field(
        False,
        description="`1`: allow an `AMPQUIZ_WORKERS_URL` with no credentials, for local development "
        "only: anyone who can reach that NATS server reads every learner's code and output and can "
        "fill or drain the queue. The logs and `/healthz` (`sandbox.broker`) then say so.",
    )
    host: str = Field("127.0.0.1", description="Address `ampquiz serve` listens on.")
    port: int = Field(8000, ge=0, le=65535, description="Port `ampquiz serve` listens on.")
    trusted_proxies: str = Field(
        "",
        description="Addresses of reverse proxies whose `X-Forwarded-For` names the client "
        "(comma-separated, e.g. `127.0.0.1` for one on this host; `*` trusts any). Empty: none, and "
        "a request's client is whoever connected, so no client can pick the address its answers and "
        "runs count against. A trusted proxy must append the address it saw (nginx: "
        "`$proxy_add_x_forwarded_for`): the rightmost address not in this list is the client's.",
    )
    public_url: str = Field(
        "",
        description="The address learners open, e.g. `https://quiz.example.edu`. When it is "
        "https, every cookie is `Secure` (sent only over TLS), even if the proxy that ends TLS "
        "does not say so. Empty: cookies are `Secure` when the request "
        "came over TLS, directly or through a trusted proxy (`AMPQUIZ_TRUSTED_PROXIES`) saying "
        "`X-Forwarded-Proto: https`.",
    )

    @field_validator("public_url")
    @classmethod
    def _an_address(cls, url: str) -> str:
        url = url.strip().rstrip("/")
        parts = urlsplit(url)
        address = parts.scheme in ("http", "https") and parts.hostname
        if url and (not address or parts.query or parts.fragment):
            raise ValueError(
                "must be the address learners open: http(s)://HOST[:PORT][/PATH], e.g. https://quiz.example.edu"
            )
        return url

    @field_validator("workers_url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        url = url.strip()
        if url and not url.startswith(("nats://", "tls://", "unix://")):
            raise ValueError(
                "must be empty (a local sandbox pool), nats://HOST:PORT or tls://HOST:PORT"
            )
        if url.startswith(("nats://", "tls://")):
            deployment_name(url)  # where its path names the deployment, a name
        return url

    @field_validator("workers_key")
    @classmethod
    def _key_for_remote_workers(cls, key: str, info: ValidationInfo) -> str:
        remote = str(info.data.get("workers_url", "")).startswith(("nats://", "tls://"))
        if remote and len(key) < MIN_WORKERS_KEY_CHARS:
            raise ValueError(
                f"{'is shorter than' if key else 'must be set, to at least'} {MIN_WORKERS_KEY_CHARS} characters: with "
                "AMPQUIZ_WORKERS_URL=nats://… the web and every worker sign their messages with this "
                "shared secret (set the same one on each; make one with "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        if remote and (why := weak_secret(key, MIN_WORKERS_KEY_CHARS)):
            raise ValueError(
                f"{why}: anyone who guesses it can forge runs and results; make one with `{MAKE_A_SECRET}`"
            )
        return key

    @classmethod
    def env_name(cls, field: str) -> str:
        return ENV_PREFIX + field.upper()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Defaults, then `AMPQUIZ_*` variables, then explicit overrides (command-line flags)."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = environ.get(cls.env_name(name))
            if raw is not None and raw != "":
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else "?"
            raise SettingsError(f"{cls.env_name(field)}: {err['msg']}") from None

    # ---- derived --------------------------------------------------------------------------

    def with_bank_found(self, environ: Mapping[str, str] | None = None) -> tuple[Settings, str]:
        """These settings with a bank that exists, and a line saying where it was found when that
        is not where they said; SettingsError when there is none. Unset, the bank is `questions`
        in the working folder: started anywhere else (`ampquiz serve` from another folder), a
        server would have served an empty bank, and said why only in its log."""
        if self.bank.exists():
            return self, ""
        environ = os.environ if environ is None else environ
        if not environ.get(self.env_name("bank")) and CHECKOUT_BANK.is_dir():
            found = self.model_copy(update={"bank": CHECKOUT_BANK})
            return (
                found,
                f"no {self.bank}/ in {Path.cwd()}: serving the project's bank, {CHECKOUT_BANK}",
            )
        raise SettingsError(
            f"{self.env_name('bank')}: there is no question bank at {self.bank.absolute()}: start in the "
            f"project's folder, or set {self.env_name('bank')} to a folder (or file) of question-set YAML files"
        )

    def sqlite_path(self) -> Path | None:
        """The database file, when the database is a SQLite file (None for memory or a server)."""
        # The plain form needs no URL parser: `serve` asks before it starts the sandbox pool, the
        # longest part of start-up, and importing SQLAlchemy's would delay that by ~0.1 s.
        plain = _PLAIN_SQLITE_URL.fullmatch(self.database_url)
        if plain is not None:
            return None if plain[1] == ":memory:" else Path(plain[1])
        from sqlalchemy.engine import make_url

        url = make_url(self.database_url)
        if not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
            return None
        return Path(url.database)

    def max_request_bytes(self) -> int:
        """Largest request body read at all; code arrives JSON- or form-encoded, which may escape a
        character into up to 12 bytes, so leave room for that and the envelope."""
        return self.max_code_bytes * 12 + 4096

    def data_dir(self) -> Path:
        """Where the server keeps its own files: the SQLite file's folder, else `var/`."""
        db = self.sqlite_path()
        return db.parent if db is not None else Path("var")

    def secret_key_problem(self) -> str | None:
        """Why `serve` must not sign cookies with the key it would use (None when it may): one
        given must be a secret; a database other than SQLite needs one given, as every web host
        must sign with the same and no data folder is this server's to keep one in; and a kept
        key must be a secret too (a file written by hand)."""
        name = self.env_name("secret_key")
        if self.secret_key:
            if why := weak_secret(self.secret_key, MIN_SECRET_KEY_CHARS):
                return f"{name} {why}: anyone who knows it can sign any learner's cookie; make one with `{MAKE_A_SECRET}`"
            return None
        if self.database_url.split(":", 1)[0].split("+", 1)[0] != "sqlite":
            return (
                f"{name} must be set with a database other than SQLite: every web process and host "
                f"signs cookies with it, the same everywhere; make one with `{MAKE_A_SECRET}`"
            )
        kept = self.data_dir() / SECRET_FILE
        try:
            kept_key = kept.read_text().strip() if kept.is_file() else None
        except OSError:
            return None  # resolved_secret_key says why it cannot be read
        if kept_key is not None and (why := weak_secret(kept_key, MIN_SECRET_KEY_CHARS)):
            return (
                f"the secret key kept in {kept} {why}: delete the file (a random one is made at the "
                f"next start), or set {name} to one made with `{MAKE_A_SECRET}`"
            )
        return None

    def secure_cookies(self) -> bool:
        """Whether learners reach the server over TLS whatever a request says (its public URL)."""
        return self.public_url.startswith("https://")

    def resolved_secret_key(self) -> str:
        """The configured key, or the one stored in the data folder (created on first use)."""
        if self.secret_key:
            return self.secret_key
        folder = self.data_dir()
        path = folder / SECRET_FILE
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            if not path.is_file():  # the folder's name is a file's, or the key's a folder's
                raise self._unkept_key(
                    folder, f"{folder} is not a folder, or {path} not a file"
                ) from None
            key = path.read_text().strip()
            if key:
                if path.stat().st_mode & 0o077:  # a copy put back with others allowed to read it
                    try:
                        path.chmod(0o600)
                    except OSError as exc:
                        raise self._unkept_key(folder, exc.strerror or str(exc)) from exc
                return key
            path.unlink()  # an empty file from a crash mid-write: start again
            return self.resolved_secret_key()
        except OSError as exc:
            raise self._unkept_key(folder, exc.strerror or str(exc)) from exc
        with os.fdopen(fd, "w") as f:
            key = secrets.token_urlsafe(32)
            f.write(key + "\n")
        return key

    def _unkept_key(self, folder: Path, why: str) -> SettingsError:
        return SettingsError(
            f"cannot keep the secret key in {folder}: {why} "
            f"(set {self.env_name('secret_key')}, or put the data where this user may write)"
        )


def settings_table() -> str:
    """The settings as a Markdown table (name, default, help), for the README and `serve --help`."""
    rows = ["| Variable | Default | What it does |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "(generated)" if name == "secret_key" else f"`{default}`"
        rows.append(f"| `{Settings.env_name(name)}` | {shown} | {field.description} |")
    return "\n".join(rows)
