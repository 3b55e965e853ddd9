"""The proof line an export carries, and the keys it leaves out: decided in `app.verify`, the
one owner of what proves a key (`app.verify.proof_lines`). Named here too for the formats and
`ampquiz export`, which import it from this module."""

from app.verify.proof_lines import committed_proof_lines, proof_line_from, without_contradicted_keys

__all__ = ["committed_proof_lines", "proof_line_from", "without_contradicted_keys"]
