"""What a check reports: a problem at a place in a file, shared by the source checks (kbuild.check.kernel_checks)
and the binary ABI check (kbuild.build.abi)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int | None
    message: str
    severity: str = "error"  # or "warning"
    fix: str | None = None
    bad_input: bool = False  # the kernel cannot be read at all (an invalid build.toml): exit code 2

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else f"{self.path}"
        text = f"{where}: {self.severity}: {self.message}"
        return text + (f"\n  fix: {self.fix}" if self.fix else "")


def format_findings(findings: list[Finding]) -> list[str]:
    return [str(f) for f in findings]
