"""The QTI 2.1 content package read back with pyslet (a QTI 2.1 and IMS content packaging
implementation): the manifest lists every item, each item parses as an `assessmentItem` with its
identifiers, correct response, mapping and feedback, and pyslet's own response processing scores a
right answer 1, a wrong one 0, and shows the picked choice's feedback and the explanation."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyslet", reason="the QTI read-back needs pyslet (the test extra)")
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning"
)  # pyslet calls its own old names

import pyslet.html401 as html
import pyslet.imscpv1p2 as imscp
import pyslet.qtiv2.xml as qtixml
from pyslet.qtiv2 import interactions
from pyslet.qtiv2 import variables as qv

from app.bank.load import Bank
from app.export.qti import to_qti
from tests.app.export import tricky


@dataclass
class Item:
    href: str
    item: Any
    """pyslet's `AssessmentItem`."""


def text_of(node: Any) -> str:
    """The text inside a pyslet element, children and all."""
    return "".join(
        child if isinstance(child, str) else text_of(child) for child in node.get_children()
    )


def flat(node: Any) -> str:
    return " ".join(text_of(node).split())


@contextlib.contextmanager
def package(data: bytes, tmp_path: Path) -> Iterator[list[Item]]:
    """The package's items, in the manifest's order, read by pyslet from the zip file."""
    path = tmp_path / "bank.zip"
    path.write_bytes(data)
    cp = imscp.ContentPackage(str(path))
    try:
        items = []
        for resource in cp.manifest.root.Resources.Resource:
            assert resource.type == "imsqti_item_xmlv2p1"
            href = str(resource.href)
            assert [str(f.href) for f in resource.File] == [href]
            doc = qtixml.QTIDocument()
            with cp.dPath.join(*href.split("/")).open("rb") as f:
                doc.read(src=f)
            items.append(Item(href, doc.root))
        yield items
    finally:
        cp.close()


def run(item: Any, response: Any) -> tuple[float, set[str]]:
    """pyslet's response processing on one response: the SCORE and the feedback shown."""
    state = qv.ItemSessionState(item)
    state.begin_session()  # (not begin_attempt: it renders HTML, which pyslet cannot for text entry)
    state["RESPONSE"] = response
    state.end_attempt()
    shown = state["FEEDBACK"].value or {}
    return state["SCORE"].value, set(shown)


def choose(identifiers: list[str], multiple: bool) -> Any:
    if not multiple:
        return qv.IdentifierValue(identifiers[0])
    value = qv.MultipleContainer(qv.BaseType.identifier)
    value.set_value(identifiers)
    return value


def _by_id(items: list[Item]) -> dict[str, Item]:
    return {i.item.identifier: i for i in items}


def code_blocks(item: Any) -> list[str]:
    return [text_of(pre) for pre in item.ItemBody.find_children_depth_first(html.Pre)]


def test_the_manifest_lists_every_question_as_an_item(bank: Bank, tmp_path: Path) -> None:
    data = to_qti(bank, tricky.proof_for)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None
        assert "imsmanifest.xml" in z.namelist()
    with package(data, tmp_path) as items:
        assert sorted(i.item.identifier for i in items) == sorted(
            [
                "plain-cuda-only",
                "mc-single-tricky",
                "mc-multiple-conceptual",
                "q-7-star-output",
                "tolerance-output",
            ]
        )  # an id that starts with a digit is not a QTI identifier: it gets `q-`
        assert {i.href for i in items} == {f"items/{q.set_id}/{q.id}.xml" for q in bank.questions}
    assert to_qti(bank, tricky.proof_for) == data  # the same bank, the same bytes


def test_a_single_answer_choice_item(bank: Bank, tmp_path: Path) -> None:
    with package(to_qti(bank, tricky.proof_for), tmp_path) as items:
        item = _by_id(items)["mc-single-tricky"].item
        assert item.title == "Title with :: colons {braces} = ~ #"
        declaration = item.ResponseDeclaration[0]
        assert declaration.identifier == "RESPONSE"
        assert declaration.get_correct_value().value == "C0"
        (interaction,) = item.ItemBody.find_children_depth_first(interactions.ChoiceInteraction)
        assert (
            interaction.responseIdentifier == "RESPONSE"
            and interaction.maxChoices == 1
            and interaction.shuffle
        )
        choices = list(interaction.find_children_depth_first(interactions.SimpleChoice))
        assert [c.identifier for c in choices] == ["C0", "C1", "C2"]
        assert [flat(c) for c in choices] == [t for t, _ in tricky.CHOICES_A_TEXT]
        assert flat(item.ItemBody).startswith(tricky.PROMPT_A_TEXT)
        assert code_blocks(item) == [tricky.CODE_BRACES.rstrip()]
        feedback = {f.identifier: f for f in item.QTIModalFeedback}
        assert set(feedback) == {"C0", "C1", "C2", "EXPLANATION"}
        assert all(f.outcomeIdentifier == "FEEDBACK" for f in feedback.values())
        assert [flat(feedback[f"C{i}"]) for i in range(3)] == [w for _, w in tricky.CHOICES_A_TEXT]
        assert (
            flat(feedback["EXPLANATION"])
            == f"{tricky.EXPLANATION_A_TEXT} Proof for mc-single-tricky <&> {{:}}"
        )
        assert run(item, choose(["C0"], False)) == (1.0, {"C0", "EXPLANATION"})
        assert run(item, choose(["C2"], False)) == (0.0, {"C2", "EXPLANATION"})


def test_a_multiple_answer_choice_item_needs_exactly_the_right_ones(
    bank: Bank, tmp_path: Path
) -> None:
    with package(to_qti(bank, tricky.proof_for), tmp_path) as items:
        item = _by_id(items)["mc-multiple-conceptual"].item
        declaration = item.ResponseDeclaration[0]
        assert sorted(declaration.get_correct_value().value) == ["C0", "C2"]
        (interaction,) = item.ItemBody.find_children_depth_first(interactions.ChoiceInteraction)
        assert interaction.maxChoices == 0 and not interaction.shuffle
        assert code_blocks(item) == []
        assert run(item, choose(["C0", "C2"], True)) == (1.0, {"C0", "C2", "EXPLANATION"})
        assert run(item, choose(["C0", "C1", "C2"], True))[0] == 0.0
        assert run(item, choose(["C0"], True))[0] == 0.0


def test_predict_output_is_a_text_entry_with_a_mapping_of_the_accepted_spellings(
    bank: Bank, tmp_path: Path
) -> None:
    with package(to_qti(bank, tricky.proof_for), tmp_path) as items:
        by_id = _by_id(items)
        star = by_id["q-7-star-output"].item
        (entry,) = star.ItemBody.find_children_depth_first(interactions.TextEntryInteraction)
        assert entry.responseIdentifier == "RESPONSE"
        declaration = star.ResponseDeclaration[0]
        assert (
            declaration.get_correct_value().value == tricky.SHORT_STAR
        )  # no wildcard here: exact text
        assert [e.mapKey for e in declaration.Mapping.MapEntry] == [tricky.SHORT_STAR]
        assert run(star, qv.StringValue(tricky.SHORT_STAR)) == (1.0, {"EXPLANATION"})
        assert run(star, qv.StringValue("a = {1: 2}"))[0] == 0.0

        tolerance = by_id["tolerance-output"].item
        mapping = tolerance.ResponseDeclaration[0].Mapping
        assert [(e.mapKey, e.mappedValue) for e in mapping.MapEntry] == [
            (tricky.ANSWER_TOL, 1.0),
            (tricky.ACCEPT_TOL, 1.0),
        ]
        for spelling in (tricky.ANSWER_TOL, tricky.ACCEPT_TOL):
            assert run(tolerance, qv.StringValue(spelling))[0] == 1.0
        assert run(tolerance, qv.StringValue(tricky.CUDA_TOL))[0] == 0.0  # another device's output
        (general,) = tolerance.QTIModalFeedback
        assert "within 0.2 % of these count as right" in flat(general)
        assert tricky.CUDA_TOL in [text_of(p) for p in general.find_children_depth_first(html.Pre)]


def test_the_default_proof_line_comes_from_the_committed_record(bank: Bank, tmp_path: Path) -> None:
    tricky.write_record(Path(bank.sets[0].path).parent, bank, {"7-star-output"})
    with package(to_qti(bank), tmp_path) as items:
        (general,) = _by_id(items)["q-7-star-output"].item.QTIModalFeedback
        assert flat(general).endswith(tricky.PROOF_PASS)


def test_the_real_bank_exports_whole(real_bank: Bank, tmp_path: Path) -> None:
    with package(to_qti(real_bank), tmp_path) as items:
        assert len(items) == len(real_bank.questions)
        by_href = {i.href: i.item for i in items}
        proofs = []
        for loaded in real_bank.questions:
            item = by_href[f"items/{loaded.set_id}/{loaded.id}.xml"]
            question = loaded.question
            if question.code:
                assert question.code.rstrip() in code_blocks(item)
            feedback = {f.identifier: f for f in item.QTIModalFeedback}
            if question.kind == "multiple_choice":
                right = [f"C{i}" for i, c in enumerate(question.choices) if c.correct]
                correct = item.ResponseDeclaration[0].get_correct_value().value
                assert sorted([correct] if isinstance(correct, str) else correct) == right
                assert set(feedback) == {f"C{i}" for i in range(len(question.choices))} | {
                    "EXPLANATION"
                }
                for i, choice in enumerate(question.choices):
                    assert tricky.words(choice.why) <= tricky.words(text_of(feedback[f"C{i}"]))
                assert run(item, choose(right, len(right) > 1))[0] == 1.0
            else:
                assert set(feedback) == {"EXPLANATION"}
                key = item.ResponseDeclaration[0].get_correct_value().value
                assert run(item, qv.StringValue(key))[0] == 1.0
            proofs.append(flat(list(feedback["EXPLANATION"].find_children_depth_first(html.P))[-1]))
        assert all(p.startswith(tricky.PROOF_STARTS) for p in proofs)
        assert any(p.startswith("Answer verified by running on CPU · torch ") for p in proofs)
