"""Settings: declared once, read from AMPQUIZ_* variables, and every one documented on the settings page."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from app.runs.jetstream import Layout
from app.settings import Settings, SettingsError
from tests.support.cli import REPO


def test_every_setting_is_documented_on_the_settings_page() -> None:
    """docs/reference/settings.md is made from Settings (`ampquiz docs`; tests/docs checks it is
    current): each setting has its row there, with its variable, default and help text."""
    page = REPO / "docs" / "reference" / "settings.md"
    text = page.read_text() if page.exists() else ""
    rows = {
        line.split(" | ", 1)[0]: line
        for line in text.splitlines()
        if line.startswith("| `AMPQUIZ_")
    }
    for name, field in Settings.model_fields.items():
        row = rows.get(f"| `{Settings.env_name(name)}`", "")
        assert row, (
            f"docs/reference/settings.md has no row for {Settings.env_name(name)}: run `ampquiz docs`"
        )
        assert " ".join((field.description or "").split()).replace("|", "\\|") in row, (
            f"{name}'s help differs there: run `ampquiz docs`"
        )
    assert len(rows) == len(Settings.model_fields), (
        f"settings the code no longer has: {sorted(rows)}"
    )


def test_every_setting_has_help_text() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description and len(field.description) > 10, name


def test_defaults() -> None:
    s = Settings.from_env({})
    assert s.database_url == "sqlite:///var/ampquiz.db"
    assert s.bank == Path("questions")
    assert (s.host, s.port, s.sandbox_workers) == ("127.0.0.1", 8000, 2)
    assert s.data_dir() == Path("var")


def test_read_from_the_environment_then_overridden_by_flags() -> None:
    env = {
        "AMPQUIZ_PORT": "9000",
        "AMPQUIZ_RUN_QUEUE": "3",
        "AMPQUIZ_DATABASE_URL": "sqlite:////srv/q/a.db",
    }
    s = Settings.from_env(env, port=9100)
    assert s.port == 9100 and s.run_queue == 3
    assert s.data_dir() == Path("/srv/q")


def test_a_bad_value_names_its_variable() -> None:
    with pytest.raises(SettingsError, match="AMPQUIZ_SANDBOX_WORKERS"):
        Settings.from_env({"AMPQUIZ_SANDBOX_WORKERS": "many"})


def test_the_generated_secret_key_is_kept_next_to_the_database(tmp_path: Path) -> None:
    s = Settings.from_env({"AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path}/db/ampquiz.db"})
    key = s.resolved_secret_key()
    assert len(key) >= 32
    assert (tmp_path / "db" / "secret_key").read_text().strip() == key
    assert (
        Settings.from_env(
            {"AMPQUIZ_DATABASE_URL": f"sqlite:///{tmp_path}/db/ampquiz.db"}
        ).resolved_secret_key()
        == key
    )
    assert (
        tmp_path / "db" / "secret_key"
    ).stat().st_mode & 0o077 == 0  # readable by the server only
    assert Settings(secret_key="given").resolved_secret_key() == "given"


@pytest.mark.parametrize(
    "url",
    ["sqlite:///var/a.db", "sqlite:////srv/ampquiz/a.db", "sqlite://", "sqlite:///:memory:", "sqlite+pysqlite:///rel.db",
     "sqlite:///a.db?mode=ro", "sqlite:///sp%20ace.db", "postgresql+psycopg://u@h/db"],
)  # fmt: skip
def test_the_sqlite_file_is_the_one_sqlalchemy_opens(url: str) -> None:
    """`sqlite_path` reads plain SQLite URLs without SQLAlchemy (serve asks before the sandbox's
    start): whatever the form, it names the file SQLAlchemy's own parser names."""
    parsed = make_url(url)
    opened = (
        parsed.database
        if parsed.drivername.startswith("sqlite") and parsed.database not in (None, "", ":memory:")
        else None
    )
    assert Settings.from_env({}, database_url=url).sqlite_path() == (
        Path(opened) if opened else None
    )


def test_a_secret_key_that_cannot_be_kept_is_a_settings_error_saying_what_to_do(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("a file where the data folder should be")
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'file' / 'db.sqlite'}")
    with pytest.raises(
        SettingsError, match=r"cannot keep the secret key in .*file.*set AMPQUIZ_SECRET_KEY"
    ):
        settings.resolved_secret_key()


def test_a_deployment_named_in_the_workers_url_must_be_a_name() -> None:
    """`nats://HOST:PORT/NAME` keeps deployments sharing a NATS server apart; a path that could
    not be one token of a subject is refused at start-up, saying what a name is."""
    key = {"AMPQUIZ_WORKERS_KEY": "tests-workers-key-of-the-right-length-0123456789"}
    for url, name in [("nats://127.0.0.1:4222", ""), ("nats://127.0.0.1:4222/", ""),
                      ("tls://user:pw@nats.example:4222/staging-2", "staging-2")]:  # fmt: skip
        assert Settings.from_env({"AMPQUIZ_WORKERS_URL": url, **key}).workers_url == url
        assert Layout.of(url).name == name
    for bad in ("nats://127.0.0.1:4222/a.b", "nats://127.0.0.1:4222/prod/eu", "nats://127.0.0.1:4222/x*",
                "nats://127.0.0.1:4222/" + "n" * 33):  # fmt: skip
        with pytest.raises(
            SettingsError,
            match=r"AMPQUIZ_WORKERS_URL.*a name is 1 to 32 letters, digits, '-' or '_'",
        ):
            Settings.from_env({"AMPQUIZ_WORKERS_URL": bad, **key})


def test_serve_started_outside_the_project_serves_the_projects_bank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no questions/ here
    found, note = Settings.from_env({}).with_bank_found({})
    assert found.bank == REPO / "questions" and found.bank.is_dir()
    assert str(tmp_path) in note and str(REPO / "questions") in note


def test_a_bank_that_is_there_is_kept_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "questions").mkdir()
    found, note = Settings.from_env({}).with_bank_found({})
    assert (found.bank, note) == (Path("questions"), "")


def test_a_bank_named_but_missing_is_refused_with_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"AMPQUIZ_BANK": "my-sets"}
    with pytest.raises(
        SettingsError, match=f"AMPQUIZ_BANK: there is no question bank at {tmp_path / 'my-sets'}"
    ):
        Settings.from_env(env).with_bank_found(env)
