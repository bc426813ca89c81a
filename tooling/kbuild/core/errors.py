"""kbuild's error classes: one per failure kind, each with the exit code the command ends with.

Exit codes: 0 ok, 1 findings (a check or test found problems), 2 bad input or usage
(KbuildError and its subclasses), 3 internal error (any other exception: a kbuild bug).
"""

from __future__ import annotations

from pathlib import Path

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
REPORT_BUGS_AT = "the issue tracker of the kernels monorepo (this repository)"


class KbuildError(Exception):
    """A user-facing failure: what went wrong, where, and how to fix it."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        where: str | int | None = None,
        fix: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.file = file
        self.where = where
        self.fix = fix

    @property
    def line(self) -> int | None:
        """The line number in `file`, when `where` is one."""
        if isinstance(self.where, int):
            return self.where
        if isinstance(self.where, str) and self.where.isdigit():
            return int(self.where)
        return None

    def __str__(self) -> str:
        location = ""
        if self.file is not None:
            location = f"{self.file}"
            if self.where not in (None, ""):
                location += f":{self.where}"
            location += ": "
        text = f"{location}{self.message}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class UsageError(KbuildError):
    """The command line names something kbuild cannot work on (a file for a folder, no kernel)."""


class ManifestError(KbuildError):
    """A build.toml that cannot be read or does not follow the schema; `where` is its line."""

    def __init__(self, message: str, *, file: Path | str, line: int | None, fix: str):
        super().__init__(message, file=file, where=line, fix=fix)


def internal_error_line(exc: BaseException) -> str:
    """The one line printed for an unexpected exception (exit code 3)."""
    detail = " ".join(str(exc).split())[:200]
    return (
        f"internal error: {type(exc).__name__}: {detail}. This is a kbuild bug: please report it, "
        f"with the command you ran, to {REPORT_BUGS_AT}; run it again with KBUILD_DEBUG=1 to print the traceback"
    )
