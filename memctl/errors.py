"""One error hierarchy and the exit codes the CLI documents.

Library code raises these; only the CLI turns them into a one-line message on
stderr (with a hint) and an exit code.
"""

from __future__ import annotations

OK = 0
FAILED = 1  # an error, a refusal, or problems found (doctor, index --check)
USAGE = 2  # bad input: names, values, options
NOT_FOUND = 3  # a fact, ledger or store that does not exist
LOCKED = 4  # the store lock could not be taken in time

EXIT_CODES = {
    OK: "success",
    FAILED: "error, refused, or problems found",
    USAGE: "bad input (name, value, option); nothing was changed",
    NOT_FOUND: "fact, ledger or store not found",
    LOCKED: "the store lock was held by another process for too long",
}


class MemctlError(Exception):
    """Base class: a message, an optional hint, and an exit code."""

    exit_code = FAILED

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = self.message.replace("\n", " ")
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class Refused(MemctlError):
    """The request is valid but would break a rule (duplicate, exists, ...)."""

    exit_code = FAILED


class BadInput(MemctlError):
    exit_code = USAGE


class NotFound(MemctlError):
    exit_code = NOT_FOUND


class LockTimeout(MemctlError):
    exit_code = LOCKED


class GitError(MemctlError):
    exit_code = FAILED
