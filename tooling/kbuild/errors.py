"""The one error type every kbuild stage raises for problems a user can fix."""

from __future__ import annotations

from pathlib import Path


class KbuildError(Exception):
    """A user-facing failure: what went wrong, where, and how to fix it."""

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
