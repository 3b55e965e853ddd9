"""The reference pages made from the code (`ampquiz docs`) are the ones committed under docs/."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from app.bank.schema import json_schema
from app.cli import main
from app.cli.docs import PAGES, generated_pages
from app.cli.docs.questions_page import FIELD_NOTES, questions_yaml_page
from tests.support.cli import REPO

DOCS = REPO / "docs"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_generated_page_is_what_the_code_makes_now(page: str) -> None:
    committed = (DOCS / page).read_text(encoding="utf-8") if (DOCS / page).is_file() else ""
    made = generated_pages()[page]
    diff = "\n".join(list(difflib.unified_diff(
        committed.splitlines(), made.splitlines(), f"docs/{page} (committed)", f"docs/{page} (the code now)",
        lineterm="", n=1,
    ))[:40])  # fmt: skip
    assert committed == made, (
        f"docs/{page} is out of date with the code: run `ampquiz docs` and commit it\n{diff}"
    )


def test_docs_check_names_each_stale_page_and_docs_writes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    assert (
        main(["docs", "--dir", str(docs), "--check"]) == 1
    )  # nothing written yet: every page is stale
    err = capsys.readouterr().err
    assert all(f"{docs / page} is out of date: run `ampquiz docs`" in err for page in PAGES), err

    assert main(["docs", "--dir", str(docs)]) == 0
    assert main(["docs", "--dir", str(docs), "--check"]) == 0
    capsys.readouterr()

    edited = docs / "reference" / "settings.md"
    edited.write_text(edited.read_text() + "a line the code does not make\n")
    assert main(["docs", "--dir", str(docs), "--check"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"{edited} is out of date: run `ampquiz docs`"
    ]


def test_the_yaml_reference_lists_every_field_of_every_object_in_the_schema() -> None:
    page = questions_yaml_page()
    sections = {s.split("\n", 1)[0]: s for s in page.split("\n## ")[1:]}
    schema = json_schema()
    common = sections["Every question"]
    for name in schema["properties"]:
        assert f"| `{name}` |" in sections["The file"], name
    for definition, body in schema["$defs"].items():
        for field in body["properties"]:
            row = f"| `{field}` |"
            assert row in sections[definition] or row in common, (
                f"{definition}.{field} is not on the page"
            )


def test_words_given_for_undescribed_fields_name_real_fields_the_schema_leaves_undescribed() -> (
    None
):
    """Once the schema describes a field, its own description is shown: the generator's words go."""
    schema = json_schema()
    for owner, field in FIELD_NOTES:
        properties = (
            schema["properties"] if owner == "QuestionSet" else schema["$defs"][owner]["properties"]
        )
        assert field in properties, (
            f"FIELD_NOTES names {owner}.{field}, which the schema does not have"
        )
        assert not properties[field].get("description"), (
            f"{owner}.{field} is described in app/bank/schema.py now: drop it from FIELD_NOTES in app/cli/docs/questions_page.py"
        )
