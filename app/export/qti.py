"""QTI 2.1: an IMS content package (a zip) of `imsmanifest.xml` and one `assessmentItem` per question.

Items live at `items/<set id>/<question id>.xml`, one manifest resource each
(`imsqti_item_xmlv2p1`). Multiple choice is a `choiceInteraction` (`maxChoices` 1 when one choice
is right, else 0) with `simpleChoice` identifiers `C<index>` (the choice's index in the YAML),
and a `correctResponse` of the right ones. Predict-output is a `textEntryInteraction` whose
response `mapping` gives 1 to every accepted spelling (case-sensitive, one line each).

Response processing is the standard template written out: match_correct for choices, map_response
for text entry (the rules themselves, not a `template` reference: a delivery engine that resolves a
reference may use the template's rules instead of the item's, which would lose the feedback rule).
One more rule sets `FEEDBACK` to the picked choices plus `EXPLANATION`, which shows each picked
choice's `modalFeedback` (its `why`) and the general one (explanation and proof line).

A question holding what XML cannot (`common.XML_CANNOT`), or whose item does not read back as XML,
is refused at its `file:line` (`common.one_question`): the package holds, and its manifest lists,
the others.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
import zipfile

from app.bank.load import Bank, LoadedQuestion
from app.bank.problem import Problem
from app.bank.public import correct_choices, multiple_answers
from app.bank.schema import MultipleChoiceQuestion, PredictOutputQuestion
from app.export import common
from app.export.common import Exported, ProofLine
from app.verify.proof_lines import committed_proof_lines

NAME = "QTI"
QTI = "http://www.imsglobal.org/xsd/imsqti_v2p1"
QTI_XSD = "http://www.imsglobal.org/xsd/qti/qtiv2p1/imsqti_v2p1.xsd"
CP = "http://www.imsglobal.org/xsd/imscp_v1p1"
CP_XSD = "http://www.imsglobal.org/xsd/imscp_v1p1.xsd"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
ITEM_TYPE = "imsqti_item_xmlv2p1"
GENERAL = "EXPLANATION"
_ZIP_DATE = (2000, 1, 1, 0, 0, 0)  # a fixed date: the same bank gives the same bytes
_KEEP = {"class", "href", "src", "alt", "colspan", "rowspan"}
"""HTML attributes QTI's content model has; others (markdown-it's `style` on table cells) go."""
_NCNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_STRUCTURAL = {
    "assessmentItem", "responseDeclaration", "correctResponse", "mapping", "outcomeDeclaration",
    "defaultValue", "itemBody", "choiceInteraction", "responseProcessing", "responseCondition",
    "responseIf", "responseElse", "setOutcomeValue", "match", "isNull", "multiple",
}  # fmt: skip
"""Elements whose white space is layout; inside the others (`pre`, a choice) it is content."""


def item_identifier(question_id: str) -> str:
    """The question's id, or `q-<id>` where the id starts with a digit (not a QTI identifier)."""
    return question_id if _NCNAME.match(question_id) else f"q-{question_id}"


def choice_identifier(index: int) -> str:
    return f"C{index}"


def item_path(loaded: LoadedQuestion) -> str:
    return f"items/{loaded.set_id}/{loaded.id}.xml"


def _q(tag: str) -> str:
    """Elements are built unqualified; the root declares QTI's namespace as the default."""
    return tag


def _el(parent: ET.Element, tag: str, **attrs: str) -> ET.Element:
    return ET.SubElement(parent, _q(tag), attrs)


def _requalify(node: ET.Element) -> ET.Element:
    """HTML parsed from markdown-it's output, as QTI content (the same element names)."""
    out = ET.Element(_q(node.tag), {k: v for k, v in node.attrib.items() if k in _KEEP})
    out.text, out.tail = node.text, node.tail
    out.extend(_requalify(child) for child in node)
    return out


def _html_into(parent: ET.Element, markup: str) -> None:
    """Append HTML (markdown-it's, which is well-formed XML) to a QTI element as QTI content."""
    holder = ET.fromstring(f"<div>{markup}</div>")
    if holder.text:
        if len(parent):
            parent[-1].tail = (parent[-1].tail or "") + holder.text
        else:
            parent.text = (parent.text or "") + holder.text
    parent.extend(_requalify(child) for child in holder)


def _value(parent: ET.Element, text: str) -> None:
    _el(parent, "value").text = text


def _set(parent: ET.Element, outcome: str) -> ET.Element:
    return _el(parent, "setOutcomeValue", identifier=outcome)


def _base(parent: ET.Element, base_type: str, text: str) -> None:
    _el(parent, "baseValue", baseType=base_type).text = text


def _score_rules(processing: ET.Element, *, mapped: bool) -> None:
    """match_correct (`mapped` False) or map_response (True), as the templates write them."""
    condition = _el(processing, "responseCondition")
    first = _el(condition, "responseIf")
    if mapped:
        _el(_el(first, "isNull"), "variable", identifier="RESPONSE")
        _base(_set(first, "SCORE"), "float", "0.0")
        _el(_set(_el(condition, "responseElse"), "SCORE"), "mapResponse", identifier="RESPONSE")
    else:
        match = _el(first, "match")
        _el(match, "variable", identifier="RESPONSE")
        _el(match, "correct", identifier="RESPONSE")
        _base(_set(first, "SCORE"), "float", "1")
        _base(_set(_el(condition, "responseElse"), "SCORE"), "float", "0")


def _indent(element: ET.Element, level: int = 0) -> None:
    """`ET.indent`, but only between structural elements: never inside text a learner reads."""
    if element.tag not in _STRUCTURAL or not len(element):
        return
    pad = "\n" + "  " * (level + 1)
    if not (element.text or "").strip():
        element.text = pad
    for child in element:
        _indent(child, level + 1)
        if not (child.tail or "").strip():
            child.tail = pad
    if not (element[-1].tail or "").strip():
        element[-1].tail = pad[:-2]


def _feedback(item: ET.Element, identifier: str, title: str, markup: str) -> None:
    modal = _el(item, "modalFeedback", outcomeIdentifier="FEEDBACK", showHide="show",
                identifier=identifier, title=title)  # fmt: skip
    _html_into(modal, markup)


def assessment_item(loaded: LoadedQuestion, proof: str) -> str:
    """One question as a QTI 2.1 `assessmentItem` document."""
    q = loaded.question
    item = ET.Element(_q("assessmentItem"), {
        "xmlns": QTI, "xmlns:xsi": XSI, "xsi:schemaLocation": f"{QTI} {QTI_XSD}", "identifier": item_identifier(q.id),
        "title": common.title(loaded), "adaptive": "false", "timeDependent": "false",
    })  # fmt: skip
    choice = q if isinstance(q, MultipleChoiceQuestion) else None
    if choice is not None:
        several = multiple_answers(choice)
        response = _el(item, "responseDeclaration", identifier="RESPONSE",
                       cardinality="multiple" if several else "single", baseType="identifier")  # fmt: skip
        correct = _el(response, "correctResponse")
        for index in sorted(correct_choices(choice)):
            _value(correct, choice_identifier(index))
    else:
        assert isinstance(q, PredictOutputQuestion)
        spellings = common.short_answers(q)
        response = _el(
            item,
            "responseDeclaration",
            identifier="RESPONSE",
            cardinality="single",
            baseType="string",
        )
        _value(_el(response, "correctResponse"), spellings[0])
        mapping = _el(response, "mapping", defaultValue="0", lowerBound="0", upperBound="1")
        for spelling in spellings:
            _el(mapping, "mapEntry", mapKey=spelling, mappedValue="1", caseSensitive="true")
    score = _el(
        item, "outcomeDeclaration", identifier="SCORE", cardinality="single", baseType="float"
    )
    _value(_el(score, "defaultValue"), "0")
    _el(
        item,
        "outcomeDeclaration",
        identifier="FEEDBACK",
        cardinality="multiple",
        baseType="identifier",
    )
    body = _el(item, "itemBody")
    _html_into(body, common.question_html(loaded))
    if choice is not None:
        interaction = _el(body, "choiceInteraction", responseIdentifier="RESPONSE",
                          shuffle="true" if choice.shuffle else "false", maxChoices="0" if several else "1")  # fmt: skip
        for index, option in enumerate(choice.choices):
            simple = _el(interaction, "simpleChoice", identifier=choice_identifier(index))
            _html_into(simple, common.inline_html_of(option.text))
    else:
        para = _el(body, "p")
        para.text = "Output: "
        longest = max(len(s) for s in spellings)
        _el(
            para,
            "textEntryInteraction",
            responseIdentifier="RESPONSE",
            expectedLength=str(max(20, longest)),
        )
    processing = _el(item, "responseProcessing")
    _score_rules(processing, mapped=choice is None)
    shown = _el(_set(processing, "FEEDBACK"), "multiple")
    if choice is not None:
        _el(shown, "variable", identifier="RESPONSE")
    _base(shown, "identifier", GENERAL)
    if choice is not None:
        for index, option in enumerate(choice.choices):
            verdict = "Right" if option.correct else "Not right"
            _feedback(item, choice_identifier(index), verdict, common.html_of(option.why))
    _feedback(item, GENERAL, "Explanation", common.general_feedback_html(loaded, proof))
    _indent(item)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(item, encoding="unicode") + "\n"


def manifest(bank: Bank, questions: list[LoadedQuestion] | None = None) -> str:
    """`imsmanifest.xml`: one item resource per question (those of `questions`, else all of the
    bank's), in the bank's order."""
    root = ET.Element("manifest", {
        "xmlns": CP, "xmlns:xsi": XSI, "identifier": "ampquiz-bank",
        "xsi:schemaLocation": f"{CP} {CP_XSD} {QTI} {QTI_XSD}",
    })  # fmt: skip
    metadata = ET.SubElement(root, "metadata")
    ET.SubElement(metadata, "schema").text = "QTIv2.1 Package"
    ET.SubElement(metadata, "schemaversion").text = "1.0.0"
    ET.SubElement(root, "organizations")
    resources = ET.SubElement(root, "resources")
    for loaded in bank.questions if questions is None else questions:
        path = item_path(loaded)
        resource = ET.SubElement(resources, "resource", {
            "identifier": f"item-{loaded.id}", "type": ITEM_TYPE, "href": path,
        })  # fmt: skip
        ET.SubElement(resource, "file", {"href": path})
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def export_qti(bank: Bank, proof_line: ProofLine | None = None) -> Exported:
    """The whole bank as a QTI 2.1 content package (zip bytes), but the questions XML cannot
    carry (refused)."""
    proof_line = proof_line or committed_proof_lines()
    items: dict[str, str] = {}
    written: list[LoadedQuestion] = []
    refused: list[Problem] = []
    for loaded_set in bank.sets:
        for q in loaded_set.questions:
            proof = proof_line(q)
            item, problem = common.one_question(
                q, NAME, common.XML_CANNOT, common.sources(q, proof, (), None),
                lambda: assessment_item(q, proof),  # noqa: B023 - called at once
                str, lambda text: ET.fromstring(text.encode("utf-8")),
            )  # fmt: skip
            if item is None:
                assert problem is not None
                refused.append(problem)
                continue
            items[item_path(q)] = item
            written.append(q)
    files = {"imsmanifest.xml": manifest(bank, written), **items}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for name, text in files.items():
            package.writestr(
                zipfile.ZipInfo(name, _ZIP_DATE), text.encode("utf-8"), zipfile.ZIP_DEFLATED
            )
    return Exported(out.getvalue(), refused)


def to_qti(bank: Bank, proof_line: ProofLine | None = None) -> bytes:
    """The whole bank as a QTI 2.1 content package (zip bytes); `common.ExportRefused` if a
    question cannot be."""
    return bytes(common.whole(export_qti(bank, proof_line)))
