"""Whether two tokenizers give the same ids to the same text (a teacher scoring a student's
tokens needs it: on-policy distillation across tokenizers is out of scope)."""

from __future__ import annotations

from typing import Any

__all__ = ["TokenizerMismatchError", "check_same_tokenizer", "tokenizer_name"]


class TokenizerMismatchError(ValueError):
    """Two tokenizers that must agree do not; the message names both and the first difference."""


def tokenizer_name(tokenizer: Any) -> str:
    """A tokenizer's name for messages: its `name_or_path`, else its class."""
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


def check_same_tokenizer(
    student: Any, teacher: Any, *, student_name: str = "", teacher_name: str = ""
) -> None:
    """Raise `TokenizerMismatchError` unless `student` and `teacher` map every token string to
    the same id (`get_vocab()`, added tokens included). The error names both tokenizers, their
    sizes and the first token they disagree on."""
    names = (student_name or tokenizer_name(student), teacher_name or tokenizer_name(teacher))
    ours, theirs = student.get_vocab(), teacher.get_vocab()
    if ours == theirs:
        return
    differing = sorted(
        (token for token in ours.keys() | theirs.keys() if ours.get(token) != theirs.get(token)),
        key=lambda token: min(ours.get(token, 1 << 62), theirs.get(token, 1 << 62)),
    )
    first = differing[0]
    raise TokenizerMismatchError(
        f"the student's tokenizer ({names[0]}, {len(ours)} tokens) and the teacher's "
        f"({names[1]}, {len(theirs)} tokens) differ ({len(differing)} tokens; first "
        f"{first!r}: id {ours.get(first)} vs {theirs.get(first)}): a teacher scores the "
        "student's own token ids, so both must use one tokenizer; pick a teacher of the "
        "student's model family"
    )
