"""What a run says of a key the bank's records do not cover yet: a question-set file an author is
editing in the studio, and an interview's ad-hoc snippets.

- The studio runs a question's code beside the editor, and each question's code again when the
  file is saved, and judges its key as the live server would (`studio_check`): `pass`, `fail`, or
  `skip` where a run here proves nothing of it (a key about what CUDA prints, or another torch).
- An ad-hoc snippet's key is what it printed when the interview was made (`snippet_key`): the only
  way ampquiz proves a key, by running it. A snippet that cannot have one answer (it prints
  nothing, fails, or prints something else when run again) is refused, with why, for the form.
  In the interview, such a key is proved (`interview_proof`); a bank question's is as the server
  holds it (`app.verify.proofs`).

No web framework: the studio's and the interview's routes call these and show what they say.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container

from app.bank.load import LoadedQuestion
from app.bank.unrepeatable import unrepeatable
from app.verify.check import KeyCheck, check, same_each_time, skip_reason
from app.verify.proofs import Proof, ProofBook
from app.verify.record import Record
from sandbox import RunResult

# ---- the studio ---------------------------------------------------------------------------------


def not_checked_here(book: ProofBook, loaded: LoadedQuestion) -> str | None:
    """Why a run on this server proves nothing of the question's key (no code, a device or a torch
    it does not run), or None when a run here is its proof."""
    return skip_reason(loaded.question, book.device, book.torch_version)


def studio_check(book: ProofBook, loaded: LoadedQuestion, run: RunResult) -> KeyCheck:
    """What `run` (of the question's code, on this server) says of its key, as the live server
    judges it: `pass`, `fail` (with the reason and the diff), or `skip`, where a run here proves
    nothing of it (a right CUDA key was reported as "differs from the answer on cpu")."""
    reason = not_checked_here(book, loaded)
    if reason:
        return KeyCheck(
            loaded.id, loaded.set_id, "skip", book.device, f"not checked on this server: {reason}"
        )
    return check(loaded, run, book.device)


# ---- an interview's ad-hoc snippets ---------------------------------------------------------------

SNIPPET_PROOF_LABEL = "ad-hoc snippet: its answer is what it printed when the interview was made"


class NoOneAnswer(ValueError):
    """An ad-hoc snippet whose key cannot be proved: it has no one answer. The message says why,
    for the interviewer's form."""


async def snippet_key(n: int, code: str, run: Callable[[str], Awaitable[RunResult]]) -> str:
    """Ad-hoc snippet `n`'s key: what `code` printed, run (by `run`) twice to see it is the same
    each time. Raises NoOneAnswer; what `run` raises (a full queue, the sandbox down) passes."""
    if chance := unrepeatable(code):  # two runs in one warm process agree on these by luck
        raise NoOneAnswer(
            f"ad-hoc snippet {n} {chance[0]}, so it has no one answer: print nothing that depends on it"
        )
    first = await run(code)
    if first.status != "ok":
        why = (
            f"{first.exception.type}: {first.exception.message}"
            if first.exception
            else (first.message or first.status)
        )
        raise NoOneAnswer(
            f"ad-hoc snippet {n} did not run to the end ({why}); its output is its answer"
        )
    if not first.stdout.strip():
        raise NoOneAnswer(f"ad-hoc snippet {n} printed nothing; what it prints is its answer, and a candidate "
                          "cannot send an empty prediction: print what the candidate should predict")  # fmt: skip
    # Its output is the key: code that prints something else each time has none.
    again = await run(code)
    if not same_each_time(first, again):
        raise NoOneAnswer(f"ad-hoc snippet {n} printed something else when run again, so it has no one answer: "
                          "seed the random generators, and print nothing that depends on timing")  # fmt: skip
    return first.stdout


def interview_proof(
    book: ProofBook, records: list[Record], snippet_ids: Container[str], loaded: LoadedQuestion
) -> Proof:
    """What proved the key of an interview's question: an ad-hoc snippet's (`snippet_ids`) by its
    run when the interview was made (`snippet_key`); a bank question's as this server holds it."""
    if loaded.id in snippet_ids:
        return Proof("proved", [{"device": "", "result": "pass", "label": SNIPPET_PROOF_LABEL}])
    return book.proof(loaded, records)
