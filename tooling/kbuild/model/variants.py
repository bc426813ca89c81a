"""Build variants: the value object, its Hub name, parsing, and detection from the running torch.

Names follow the Kernel Hub: `torch213-cxx11-cu130-x86_64-linux`,
`torch-stable-abi213-cpu-x86_64-linux`, `torch213-metal-aarch64-darwin`, `torch-cuda`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from kbuild.core.errors import KbuildError
from kbuild.model import backends

COMPILED, STABLE_ABI, NOARCH = "compiled", "stable-abi", "noarch"

_ARCH = r"(?P<cpu>x86_64|aarch64)-(?P<os>linux|darwin|windows)"


def _name_patterns() -> tuple[str, str, str]:
    """The regexes of noarch, stable-ABI and compiled variant names, for the backends registered now."""
    compute = rf"(?P<compute>{backends.tag_pattern()})"
    return (
        rf"torch-(?P<backend>{'|'.join(map(re.escape, backends.names()))})",
        rf"torch-stable-abi(?P<major>\d)(?P<minor>\d+)-{compute}-{_ARCH}",
        rf"torch(?P<major>\d)(?P<minor>\d+)(?:-cxx11)?-{compute}-{_ARCH}",
    )


@dataclass(frozen=True, order=True)
class Variant:
    """One build target: torch version x backend (+ toolkit) x cpu x os x ABI kind."""

    torch: str | None  # "2.13"; None for noarch
    backend: str  # cpu, cuda, rocm, xpu, metal, ...
    toolkit: str | None = None  # "13.0" (CUDA), "7.1" (ROCm), "2026.0" (oneAPI)
    cpu: str = "x86_64"
    os: str = "linux"
    kind: str = COMPILED

    @property
    def compute(self) -> str:
        record = backends.by_name().get(self.backend)
        if record and record.tag:
            return record.tag + _compact(self.toolkit)
        return self.backend

    @property
    def torch_tag(self) -> str:
        return _compact(self.torch)

    @property
    def name(self) -> str:
        if self.kind == NOARCH:
            return f"torch-{self.backend}"
        arch = f"{self.cpu}-{self.os}"
        if self.kind == STABLE_ABI:
            return f"torch-stable-abi{self.torch_tag}-{self.compute}-{arch}"
        abi = "" if self.os == "darwin" else "-cxx11"
        return f"torch{self.torch_tag}{abi}-{self.compute}-{arch}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: str) -> Variant:
        noarch, stable, compiled = _name_patterns()
        match = re.fullmatch(noarch, name)
        if match:
            return cls(torch=None, backend=match["backend"], cpu="", os="", kind=NOARCH)
        kind = STABLE_ABI
        match = re.fullmatch(stable, name)
        if match is None:
            kind = COMPILED
            match = re.fullmatch(compiled, name)
        if match is None:
            raise KbuildError(
                f"`{name}` is not a build variant name",
                fix="use a name like torch213-cxx11-cu130-x86_64-linux, "
                "torch-stable-abi213-cpu-x86_64-linux or torch-cuda (see `kbuild variants`)",
            )
        backend, toolkit = backends.from_tag(match["compute"])
        variant = cls(
            torch=f"{match['major']}.{match['minor']}",
            backend=backend,
            toolkit=toolkit,
            cpu=match["cpu"],
            os=match["os"],
            kind=kind,
        )
        if variant.name != name:
            raise KbuildError(
                f"`{name}` is not in canonical form",
                fix=f"write it as `{variant.name}`",
            )
        return variant

    def with_stable_abi(self, torch: str) -> Variant:
        """This variant built against torch `torch`'s stable ABI (e.g. "2.10")."""
        return Variant(major_minor(torch), self.backend, self.toolkit, self.cpu, self.os, STABLE_ABI)

    def with_kind(self, kind: str) -> Variant:
        if kind == NOARCH:
            return Variant(torch=None, backend=self.backend, cpu="", os="", kind=NOARCH)
        return Variant(self.torch, self.backend, self.toolkit, self.cpu, self.os, kind)


@dataclass(frozen=True)
class BuiltVariant:
    """A variant as metadata.json (or a CI job) describes it: its name, backend and archs."""

    name: str
    backend: str
    archs: list[str]


def major_minor(version: str) -> str:
    """'2.13.0+cu130' -> '2.13', '6.2.41133-dd7f95766' -> '6.2' (torch's HIP version)."""
    return ".".join(version.split("+")[0].split(".")[:2])


def _compact(version: str | None) -> str:
    """'13.0' -> '130', '2026.0' -> '20260'."""
    if not version:
        raise KbuildError("a toolkit or torch version is missing", fix="give versions like 2.13 or 13.0")
    major, minor = (version.split(".") + ["0"])[:2]
    return f"{major}{minor}"


@dataclass(frozen=True)
class TorchInstall:
    """What a build needs to know about the torch of the running Python, read without importing it."""

    version: str  # full, e.g. "2.13.0+cpu"
    package_dir: Path
    # The backend fields of torch/version.py that are set, by name (`cuda = 13.0`): the
    # `torch_field` of a backend record says which one, if any, marks a torch built for it.
    backend_fields: dict[str, str]

    @property
    def major_minor(self) -> str:
        return major_minor(self.version)

    @property
    def backend(self) -> str:
        for record in backends.ALL:
            if record.torch_field in self.backend_fields:
                return record.name
        return next((b.name for b in backends.ALL if b.torch_platform == sys.platform), backends.CPU.name)

    def toolkit(self, backend: backends.Backend) -> str | None:
        """The version of `backend`'s toolkit torch was built with, when torch records it ("13.0")."""
        return self.backend_fields.get(backend.torch_field or "") if backend.torch_field_is_toolkit else None

    @property
    def include_dirs(self) -> list[Path]:
        include = self.package_dir / "include"
        return [include, include / "torch" / "csrc" / "api" / "include"]

    @property
    def library_dir(self) -> Path:
        return self.package_dir / "lib"


def find_torch() -> TorchInstall:
    """Locate the installed torch and read its version module as text (importing torch is slow)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise KbuildError(
            "torch is not installed in this Python",
            fix="install the torch you build for, e.g. `pip install torch==2.13.0`",
        )
    package_dir = Path(spec.origin).parent
    version_py = (package_dir / "version.py").read_text(encoding="utf-8")

    def field(name: str) -> str | None:
        match = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", version_py, re.M)
        return match.group(1) if match else None

    version = field("__version__") or importlib.metadata.version("torch")
    names = {record.torch_field for record in backends.ALL if record.torch_field}
    found = {name: value for name in sorted(names) if (value := field(name)) is not None}
    return TorchInstall(version=version, package_dir=package_dir, backend_fields=found)


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _os() -> str:
    return {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform, sys.platform)


def detect_variant(backend: str | None = None) -> Variant:
    """The variant the running Python's torch can build and load.

    `backend="cpu"` asks for a CPU build with a CUDA/ROCm torch (the CPU kernels of a
    kernel are the same code whatever the torch build)."""
    torch = find_torch()
    found = torch.backend
    if backend is None or backend == found:
        backend = found
    elif backend != backends.CPU.name:
        raise KbuildError(
            f"the running torch {torch.version} builds for `{found}`, not `{backend}`",
            fix=f"run kbuild from a Python environment whose torch was built for {backend}",
        )
    record = backends.get(backend)
    toolkit = torch.toolkit(record)
    return Variant(
        torch=torch.major_minor,
        backend=backend,
        toolkit=major_minor(toolkit) if toolkit else None,
        cpu=_machine(),
        os=_os(),
    )
