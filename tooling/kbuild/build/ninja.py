"""Run ninja for a build: stream its output as it comes, and stop at the first failed command.

Ninja prints a command's output when the command ends, so a compile error arrives as soon as
the compiler exits. The build stops there (ninja stops the compiles still running) instead
of waiting for them, and the error names the source file and line of the compiler's first
error (`file:line:col: error:` from gcc and clang, `file(line): error` from nvcc).
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from kbuild.core.errors import KbuildError

Log = Callable[[str], None]
# Ninja writes a failed command's output at once; this long a silence after it ends it.
OUTPUT_SETTLES_S = 0.2
STOP_TIMEOUT_S = 10.0
_ERROR = re.compile(
    r"^(?P<file>[^\s:(][^:(]*?)(?::(?P<line>\d+)(?::\d+)?:|\((?P<paren_line>\d+)\):)"
    r"\s*(?:fatal )?error\b:?\s*(?P<message>.*)$"
)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def run_ninja(args: list[str], build_dir: Path, log: Log) -> None:
    """Run ninja in `build_dir`, logging each line it prints (progress, warnings); on the first
    failed command, stop ninja and raise a KbuildError at the compiler's first error."""
    env = {**os.environ, "NINJA_STATUS": "[%f/%t %es] "}
    process = subprocess.Popen(
        [*args, "-k", "1"],
        cwd=build_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        failed, last = _follow(process, log)
    except BaseException:  # Ctrl-C included: leave no compile running
        _stop(process)
        raise
    if failed:
        _stop(process)
        raise compile_error(failed, build_dir)
    code = process.wait()
    if code != 0:
        raise KbuildError(
            f"ninja failed (exit {code}): {last}",
            file=build_dir / "build.ninja",
            fix="see ninja's output above; `kbuild generate` rewrites the project",
        )


def _follow(process: subprocess.Popen[str], log: Log) -> tuple[list[str], str]:
    """Log ninja's lines as they come until it ends or a command fails; return the failed
    command's lines (its FAILED line, the command, its output; empty if none) and the last line."""
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    failed: list[str] = []
    last = ""
    while True:
        try:
            line = lines.get(timeout=OUTPUT_SETTLES_S if failed else None)
        except queue.Empty:
            break
        if line is None or (failed and line.startswith(("[", "FAILED: ", "ninja: "))):
            break
        if failed or line.startswith("FAILED: "):
            failed.append(line)
            if len(failed) != 2:  # the command line, long and in the build tree, is left out
                log("  " + line)
        elif not line.startswith("ninja: Entering directory"):
            log("  " + line)
            last = line
    return failed, last


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop ninja (on SIGTERM it stops the commands it runs); kill it after a while."""
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def first_error(lines: list[str]) -> tuple[str, int, str] | None:
    """The file (as the compiler wrote it), line and message of the first compiler error in
    `lines` (None when there is none)."""
    for line in lines:
        match = _ERROR.match(line)
        if match:
            return match["file"], int(match["line"] or match["paren_line"]), match["message"] or "error"
    return None


def compile_error(failed: list[str], build_dir: Path) -> KbuildError:
    """The error of a failed ninja command, at the first compiler error of its output."""
    target = re.sub(r"^FAILED:\s*(?:\[code=\d+\]\s*)?", "", failed[0]).strip()
    found = first_error(failed[2:])
    if found is not None:
        file, number, message = found
        path = Path(file)
        path = path if path.is_absolute() else (build_dir / path).resolve()
        return KbuildError(
            message,
            file=path,
            where=number,
            fix=f"look at line {number} of {path.name} (the compiler's output is above)",
        )
    return KbuildError(
        f"building {target} failed",
        file=build_dir / "build.ninja",
        fix=f"the command's output is above; `ninja -C {build_dir} -v` prints the commands",
    )
