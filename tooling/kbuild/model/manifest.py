"""build.toml: the schema as typed classes, and the loader that reads a kernel's manifest into them.

Edition 5 is the current schema. Files without an `edition` key are edition 4 and are
upgraded in memory; the 2025 format (`[general] universal = ...`) is edition 2 and is
upgraded in memory too, with a warning that says what to add. `upgrade_file` persists it.

To add a key, add a field to its table's class below: the validator, its errors and the
schema test all follow from the field (see kbuild.model.schema).
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from kbuild.core.errors import ManifestError, UsageError
from kbuild.core.tomlcompat import tomllib
from kbuild.model import backends as registry
from kbuild.model import flags
from kbuild.model.schema import (
    Checked,
    Key,
    Problem,
    Rule,
    SourceMap,
    Validator,
    closest,
    describe_value,
    fields_of,
    key,
    matches,
    one_of,
    show,
    table_name,
)

CURRENT_EDITION = 5
FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")
NAME_PATTERN = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
# The Hub's limit for a repository name; it also keeps build folders and op names short.
NAME_MAX_LENGTH = 96
DEFAULT_HUB_OWNER = "kernels-community"  # of a kernel whose build.toml names no repo-id
KERNEL_TABLE_NAME = re.compile(r"[A-Za-z0-9_][-A-Za-z0-9_]{0,63}")
# The names the `kernels` loader resolves: any backend may use the general ones, a [general.<backend>]
# table also its backend's own (its registry record's python_depends).
PYTHON_DEPENDS = ("einops", "helion", "tvm-ffi")
CUTLASS_DEPENDS = tuple(f"cutlass_{v}" for v in ("2_10", "3_5", "3_6", "3_8", "3_9", "4_0", "4_4", "4_5"))
KERNEL_DEPENDS = ("torch", *CUTLASS_DEPENDS, "sycl_tla", "metal-cpp")
GIT_URL_SCHEMES = ("https", "http", "git", "ssh", "git+ssh", "git+https", "git+http")
# kbuild also takes file:// URLs (local mirrors, and the upstream repositories of sync's tests).
KBUILD_GIT_URL_SCHEMES = (*GIT_URL_SCHEMES, "file")
STRICTER = "kbuild is stricter than kernel-builder here on purpose: "

# What edition 2 (the 2025 guides' format) lacks, in the words a user needs.
EDITION_2_HINT = (
    "this build.toml uses the 2025 format (edition 2). Add to [general]: "
    'edition = 5, version = 1, license = "<SPDX id>", backends = {backends}; '
    "remove `universal` (a universal kernel becomes a [torch-noarch] table). "
    "`kbuild update-build {kernel_dir}` writes this for you."
)


# -- rules for single values -------------------------------------------------------------
def _stricter(rule: Rule, why: str) -> Rule:
    """`rule`, with a message that says kernel-builder accepts the value and why kbuild does not."""

    def stricter(value: Any) -> Problem | None:
        problem = rule(value)
        return (f"{problem[0]} ({STRICTER}{why})", problem[1]) if problem else None

    return stricter


def _kernel_name(value: str) -> Problem | None:
    if not NAME_PATTERN.fullmatch(value):
        return (
            f"invalid name `{show(value)}`",
            "use two or more lowercase letters, digits and `-`, starting with a letter and not ending with `-`",
        )
    if len(value) > NAME_MAX_LENGTH:
        return (
            f"the name has {len(value)} characters, more than {NAME_MAX_LENGTH} ({STRICTER}"
            "the Hub refuses longer repository names, and build folders and op names are made from it)",
            f"use a name of at most {NAME_MAX_LENGTH} characters",
        )
    return None


# Suffixes of compiled code and binaries: `pyext` stages Python files and data as sources, never these.
BINARY_SUFFIXES = ("so", "pyd", "dll", "dylib", "a", "o", "obj", "lib", "pyc", "pyo", "exe", "bin", "metallib")


def _pyext(value: str) -> Problem | None:
    if re.fullmatch(r"[A-Za-z0-9]+", value) and value.lower() not in BINARY_SUFFIXES:
        return None
    return (
        f"`{show(value)}` is not a suffix of Python or data files",
        "list suffixes without the dot, such as py, pyi, json; compiled files come from the build, "
        f"never from torch-ext ({', '.join(BINARY_SUFFIXES)} are refused)",
    )


def _git_url(value: str) -> Problem | None:
    url = value.strip()
    scheme, sep, rest = url.partition("://")
    if sep and scheme in KBUILD_GIT_URL_SCHEMES and rest.strip("/"):
        return None
    if not sep and re.fullmatch(r"[^@\s/:]+@[^\s/:]+:\S+", url):
        return None
    return f"invalid git URL `{show(value)}`", "write an https:// (or ssh://, git@host:path) URL of a git repository"


def _version(value: str) -> Problem | None:
    if re.fullmatch(r"\d+\.\d+", value):
        return None
    return f"invalid version `{show(value)}`", 'write major.minor, e.g. "12.8" or "2.10"'


def _edition(value: int) -> Problem | None:
    if value == CURRENT_EDITION:
        return None
    return (
        f"unsupported edition {value}",
        f"set edition = {CURRENT_EDITION} (leave `edition` out only in an edition 4 file; "
        "`kbuild update-build` upgrades older files)",
    )


def _non_negative(value: int) -> Problem | None:
    return None if value >= 0 else (f"version must be >= 0, got {value}", "set version = 1")


def _python_depends(backend: str | None) -> Rule:
    def allowed() -> tuple[str, ...]:
        return PYTHON_DEPENDS + (registry.get(backend).python_depends if backend else ())

    why = "the `kernels` loader refuses a build with an unknown dependency when it loads it"
    return _stricter(one_of(allowed), why)


_capability = _stricter(
    matches(r"\d+\.\d+[af]?(\+PTX)?", "CUDA capability", '"8.0", "9.0a", "10.0+PTX"'), "nvcc refuses it at build time"
)
_rocm_arch = _stricter(matches(r"gfx[0-9a-f]+", "ROCm arch", '"gfx942"'), "the compiler refuses it at build time")
_kernel_table = _stricter(
    matches(KERNEL_TABLE_NAME.pattern, "kernel table name", "[kernel.my_kernel_cuda]"),
    "the name becomes a folder and a CMake target name (letters, digits, `_`, `-`; at most 64)",
)


def _inside(path: str) -> Problem | None:
    if path and "\0" not in path and not Path(path).is_absolute() and ".." not in Path(path).parts:
        return None
    return f"`{show(path)}` must be a path inside the kernel folder", "use a relative path without `..`"


def _path(path: str) -> Problem | None:
    return _inside(path) or flags.name_problem(path)


_source = _stricter(_path, "a build reads only files of its kernel folder, by names CMake reads literally")
_include = _stricter(flags.name_problem, "the folder names are written into the generated CMake project")
_flag = _stricter(flags.syntax_problem, "a flag reaches the compiler as written, never CMake's language or a program")


# -- the schema --------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelDependency(Checked):
    repo_id: str = key(example='"org/name"')
    version: int | None = key(default=None, rule=_non_negative, example="1")
    revision: str | None = None

    def problem(self) -> Problem | None:
        if (self.version is None) == (self.revision is None):
            return (
                f"the dependency on {show(self.repo_id)} needs exactly one of `version` and `revision`",
                'write { repo-id = "org/name", version = 1 } or { repo-id = "org/name", revision = "<rev>" }',
            )
        return None

    def as_toml(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in (("repo-id", self.repo_id), ("version", self.version), ("revision", self.revision))
            if v is not None
        }


@dataclass(frozen=True)
class Hub:
    repo_id: str | None = key(default=None, example='"org/name"')
    branch: str | None = None


@dataclass(frozen=True)
class CudaGeneral:
    minver: str | None = key(default=None, rule=_version, example='"12.6"')
    maxver: str | None = key(default=None, rule=_version, example='"13.0"')
    python_depends: list[str] = key(factory=list, rule=_python_depends("cuda"), example='["nvidia-cutlass-dsl"]')
    kernel_depends: list[KernelDependency] = key(factory=list, example='[{ repo-id = "org/name", version = 1 }]')


@dataclass(frozen=True)
class XpuGeneral:
    python_depends: list[str] = key(factory=list, rule=_python_depends("xpu"), example='["onednn"]')
    kernel_depends: list[KernelDependency] = key(factory=list, example='[{ repo-id = "org/name", version = 1 }]')


@dataclass(frozen=True)
class NeuronGeneral:
    python_depends: list[str] = key(factory=list, rule=_python_depends("neuron"), example='["nki"]')
    kernel_depends: list[KernelDependency] = key(factory=list, example='[{ repo-id = "org/name", version = 1 }]')


@dataclass(frozen=True)
class TpuGeneral:
    python_depends: list[str] = key(factory=list, rule=_python_depends("tpu"), example='["einops"]')


@dataclass(frozen=True)
class General:
    name: str = key(rule=_kernel_name, example='"my-kernel"')
    version: int = key(rule=_non_negative, example="1")
    edition: int = key(rule=_edition, example=str(CURRENT_EDITION))
    license: str = key(example='"Apache-2.0"')
    backends: list[str] = key(rule=one_of(registry.names, meant=registry.meant), example='["cpu", "cuda"]')
    upstream: str | None = key(default=None, rule=_git_url, example='"https://github.com/org/repo"')
    source: str | None = key(default=None, rule=_git_url, example='"https://github.com/org/repo"')
    python_depends: list[str] = key(factory=list, rule=_python_depends(None), example='["einops"]')
    dependencies: list[KernelDependency] = key(
        "kernel-depends", factory=list, example='[{ repo-id = "org/name", version = 1 }]'
    )
    hub: Hub = field(default_factory=Hub)
    cuda: CudaGeneral = field(default_factory=CudaGeneral)
    xpu: XpuGeneral = field(default_factory=XpuGeneral)
    neuron: NeuronGeneral = field(default_factory=NeuronGeneral)
    tpu: TpuGeneral = field(default_factory=TpuGeneral)

    @property
    def kernel_depends(self) -> list[dict[str, Any]]:
        """Every kernel dependency (general and CUDA), as build.toml writes them."""
        return [d.as_toml() for d in (*self.dependencies, *self.cuda.kernel_depends)]

    def backend_table(self, backend: str) -> Any:
        """The [general.<backend>] table (CudaGeneral, ...); None when the schema has none for it."""
        tables = {f.name for f in fields(self)} & set(registry.names())
        return getattr(self, backend) if backend in tables else None


_PYEXT_WHY = "a prebuilt library in torch-ext would be staged and loaded as if built from the sources"


@dataclass(frozen=True)
class TorchSpec:
    src: list[str] = key(factory=list, rule=_source, example='["torch-ext/torch_binding.cpp"]')
    include: list[str] = key(factory=list, rule=_include)
    pyext: list[str] = key(factory=lambda: ["py", "pyi"], rule=_stricter(_pyext, _PYEXT_WHY))
    minver: str | None = key(default=None, rule=_version, example='"2.10"')
    maxver: str | None = key(default=None, rule=_version, example='"2.13"')
    cxx_flags: list[str] = key(factory=list, rule=_flag)
    stable_abi: str | dict[str, str] | None = key(
        default=None, rule=_version, names=one_of(registry.names, meant=registry.meant), example='"2.10"'
    )

    def stable_abi_for(self, backend: str) -> str | None:
        if isinstance(self.stable_abi, dict):
            return self.stable_abi.get(backend)
        return self.stable_abi


@dataclass(frozen=True)
class TvmFfiSpec:
    src: list[str] = key(factory=list, rule=_source, example='["torch-ext/torch_binding.cpp"]')
    include: list[str] = key(factory=list, rule=_include)
    pyext: list[str] = key(factory=lambda: ["py", "pyi"], rule=_stricter(_pyext, _PYEXT_WHY))
    cxx_flags: list[str] = key(factory=list, rule=_flag)


@dataclass(frozen=True)
class NoarchSpec:
    pyext: list[str] = key(factory=lambda: ["py", "pyi"], rule=_stricter(_pyext, _PYEXT_WHY))
    cuda_capabilities: list[str] = key("cuda_capabilities", factory=list, example='["8.0"]')
    rocm_archs: list[str] = key("rocm_archs", factory=list, example='["gfx942"]')


@dataclass(frozen=True)
class KernelSpec:
    name: str = table_name()
    backend: str = key(rule=one_of(registry.compiled, meant=registry.meant), example='"cuda"')
    depends: list[str] = key(rule=one_of(KERNEL_DEPENDS), example='["torch"]')
    src: list[str] = key(rule=_source, example='["my_kernel/kernel.cu"]')
    include: list[str] = key(factory=list, rule=_include)
    cxx_flags: list[str] = key(factory=list, rule=_flag)
    # The keys of one backend's kernels only (its registry record's kernel_keys).
    cuda_capabilities: list[str] = key(factory=list, rule=_capability, example='["8.0", "9.0"]')
    cuda_flags: list[str] = key(factory=list, rule=_flag)
    cuda_minver: str | None = key(default=None, rule=_version, example='"12.8"')
    rocm_archs: list[str] = key(factory=list, rule=_rocm_arch, example='["gfx942"]')
    hip_flags: list[str] = key(factory=list, rule=_flag)
    sycl_flags: list[str] = key(factory=list, rule=_flag)


@dataclass(frozen=True)
class BuildToml:
    """The whole file: [general], one framework table, and [kernel.<name>] tables."""

    general: General = key(example="{ ... }")
    torch: TorchSpec | None = None
    torch_noarch: NoarchSpec | None = None
    tvm_ffi: TvmFfiSpec | None = None
    kernel: dict[str, KernelSpec] = key(factory=dict, names=_kernel_table)


@dataclass(frozen=True)
class Manifest:
    path: Path
    general: General
    framework: str
    torch: TorchSpec | None
    noarch: NoarchSpec | None
    kernels: dict[str, KernelSpec]
    source_edition: int

    @property
    def kernel_dir(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        return self.general.name

    @property
    def python_name(self) -> str:
        return self.general.name.replace("-", "_")

    @property
    def version(self) -> int:
        return self.general.version

    @property
    def backends(self) -> list[str]:
        return self.general.backends

    @property
    def repo_id(self) -> str:
        return self.general.hub.repo_id or f"{DEFAULT_HUB_OWNER}/{self.general.name}"

    @property
    def upload_branch(self) -> str:
        return self.general.hub.branch or f"v{self.general.version}"

    @property
    def is_noarch(self) -> bool:
        return self.framework == "torch-noarch"

    def kernels_for(self, backend: str) -> list[KernelSpec]:
        return [k for k in self.kernels.values() if k.backend == backend]

    def python_depends_for(self, backend: str) -> list[str]:
        table = self.general.backend_table(backend)
        return sorted({*self.general.python_depends, *(table.python_depends if table else [])})

    def toolkit_bounds(self, backend: str) -> tuple[str | None, str | None]:
        """The versions of `backend`'s toolkit a build may use, from [general.<backend>] minver and
        maxver (`[general.cuda] minver = "12.8"`); None: no bound."""
        table = self.general.backend_table(backend)
        return getattr(table, "minver", None), getattr(table, "maxver", None)


# -- reading a file ----------------------------------------------------------------------
def manifest_path(kernel_dir: Path | str) -> Path:
    """`<kernel_dir>/build.toml`, or a UsageError that says what to pass instead."""
    given = Path(kernel_dir)
    try:
        if given.is_file():
            fix = "pass a kernel folder (one with a build.toml), e.g. kernels/relu"
            if given.name == "build.toml":
                fix = f"pass its folder: {given.parent}"
            raise UsageError(f"{given} is a file, not a kernel folder", fix=fix)
        if not given.is_dir():
            raise UsageError(
                f"{given} does not exist",
                fix=f"pass a kernel folder such as kernels/relu, or create it with `kbuild init {given}`",
            )
        path = given / "build.toml"
        if not path.is_file():
            raise UsageError(
                f"{given} has no build.toml, so it is not a kernel folder",
                fix="pass a kernel folder (kernels/<name>); `kbuild init kernels/<name>` creates a new one",
            )
    except OSError as exc:
        raise UsageError(f"cannot read {show(str(given))}: {exc.strerror}", fix="pass a kernel folder") from None
    return path


def load_manifest(kernel_dir: Path | str) -> Manifest:
    """Read and validate `<kernel_dir>/build.toml`; raise a KbuildError on any problem."""
    path = manifest_path(kernel_dir)
    text = read_text(path)
    return validate(parse_toml(text, path), path, text)


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(
            f"cannot read the file: {exc.strerror}", file=path, line=None, fix="check its permissions"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(
            f"not UTF-8: byte 0x{data[exc.start]:02x} cannot be decoded",
            file=path,
            line=line,
            fix="save build.toml as UTF-8 text (TOML files must be UTF-8)",
        ) from None


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        line = int(match.group(1)) if match else text.count("\n") + 1  # "at end of document"
        raise ManifestError(
            f"invalid TOML: {exc}",
            file=path,
            line=line,
            fix="correct the TOML syntax at that line (quotes, brackets, `key = value`)",
        ) from None
    except RecursionError:
        raise ManifestError(
            "invalid TOML: arrays or tables nested too deeply to read",
            file=path,
            line=_deepest_line(text),
            fix="nest arrays and inline tables at most a few levels deep",
        ) from None
    except ValueError as exc:  # an integer with more digits than Python converts
        digits = re.search(r"\d{1000,}", text)
        raise ManifestError(
            f"invalid TOML: {show(str(exc), 120)}",
            file=path,
            line=text.count("\n", 0, digits.start()) + 1 if digits else None,
            fix="TOML integers are 64-bit: use a smaller number",
        ) from None


def _deepest_line(text: str) -> int:
    depth, deepest, line, at = 0, 0, 1, 1
    for char in text:
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, line
        elif char in "]}":
            depth -= 1
        elif char == "\n":
            line += 1
    return at


# -- editions ----------------------------------------------------------------------------
def detect_edition(raw: dict[str, Any], validator: Validator) -> int:
    """The file's edition; what it is read from is type-checked first, so the upgrade is safe."""
    general = raw.get("general", {})
    if not isinstance(general, dict):
        raise validator.error(
            ("general",),
            f"expected a table, got {describe_value(general)}",
            "write a [general] header and its `key = value` lines",
        )
    if "edition" in general:
        return int(validator.value(int, general["edition"], ("general", "edition"), Key(rule=_edition)))
    if "universal" in general:
        validator.value(bool, general["universal"], ("general", "universal"), Key())
        return 2
    return 4


def upgrade_data(data: dict[str, Any], edition: int, *, license: str | None = None) -> dict[str, Any]:
    """Edition-5 data for an edition 2 or 4 build.toml (the input is not changed).

    Edition 4 lacks only `edition`. Edition 2 also lacks `version`, `backends` (taken from
    the kernels' backends) and `license`, and a universal kernel becomes [torch-noarch].
    """
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    general = data.setdefault("general", {})
    if edition == 2:
        kernels = data.get("kernel", {})
        tables = kernels.values() if isinstance(kernels, dict) else []
        backends = sorted({t["backend"] for t in tables if isinstance(t, dict) and isinstance(t.get("backend"), str)})
        if general.pop("universal"):
            data.pop("torch", None)
            data["torch-noarch"] = {}
            backends = backends or ["cpu", "cuda"]
        general.setdefault("backends", backends)
        general.setdefault("version", 1)
        if license is not None:
            general.setdefault("license", license)
    general["edition"] = CURRENT_EDITION
    return data


def upgrade_warning(edition: int, upgraded: dict[str, Any], kernel_dir: Path) -> str:
    if edition == 2:
        found = upgraded["general"].get("backends")
        names = found if isinstance(found, list) and all(isinstance(b, str) for b in found) else []
        backends = "[" + ", ".join(f'"{b}"' for b in names) + "]"
        return f"{kernel_dir / 'build.toml'}: " + EDITION_2_HINT.format(backends=backends, kernel_dir=kernel_dir)
    return (
        f"{kernel_dir / 'build.toml'}: no `edition` key, reading it as edition 4 and upgrading in memory; "
        f"add `edition = {CURRENT_EDITION}` to [general] (`kbuild update-build {kernel_dir}` does it)"
    )


# -- rules across tables -----------------------------------------------------------------
def validate(raw: dict[str, Any], path: Path, text: str, *, license: str | None = "NOASSERTION") -> Manifest:
    """The Manifest of parsed build.toml data, upgraded from edition 2 or 4 with a warning."""
    validator = Validator(path, text)
    if "general" not in raw:
        raise ManifestError(
            "missing table [general]",
            file=path,
            line=None,
            fix="add [general] with name, version, edition, license and backends",
        )
    edition = detect_edition(raw, validator)
    if edition != CURRENT_EDITION:
        raw = upgrade_data(raw, edition, license=license)
        warnings.warn(upgrade_warning(edition, raw, path.parent), stacklevel=3)
    frameworks = [f for f in FRAMEWORKS if f in raw]
    if len(frameworks) > 1:
        raise validator.error(
            (frameworks[1],),
            f"a second framework table ({', '.join(f'[{f}]' for f in frameworks)})",
            "keep one of [torch] (compiled), [torch-noarch] (pure Python/Triton) or [tvm-ffi]",
        )
    toml = validator.table(BuildToml, raw, ())
    if not frameworks:
        raise ManifestError(
            "no framework table",
            file=path,
            line=None,
            fix="add one of [torch] (compiled), [torch-noarch] (pure Python/Triton) or [tvm-ffi]",
        )
    torch = toml.torch
    if toml.tvm_ffi is not None:
        ffi = toml.tvm_ffi
        torch = TorchSpec(src=ffi.src, include=ffi.include, pyext=ffi.pyext, cxx_flags=ffi.cxx_flags)
    for kernel_table in toml.kernel.values():
        _check_backend_keys(validator, kernel_table, raw["kernel"][kernel_table.name])
    general = toml.general
    _check_backends(validator, general, toml.kernel, noarch=toml.torch_noarch is not None)
    _check_sources(validator, path.parent, ("torch" if toml.torch else "tvm-ffi",), torch.src if torch else [])
    for name, kernel_table in toml.kernel.items():
        _check_sources(validator, path.parent, ("kernel", name), kernel_table.src)
    if torch:
        _check_flag_paths(validator, path.parent, ("torch" if toml.torch else "tvm-ffi",), torch)
    for name, kernel_table in toml.kernel.items():
        _check_flag_paths(validator, path.parent, ("kernel", name), kernel_table)
    _check_folder_name(path)
    return Manifest(path, general, frameworks[0], torch, toml.torch_noarch, toml.kernel, edition)


_ESCAPES = "`src` and `include` cannot leave the kernel folder, and neither can a flag"


def _check_flag_paths(validator: Validator, root: Path, table: tuple[str, ...], spec: TorchSpec | KernelSpec) -> None:
    cls: Any = type(spec)
    for f in fields_of(cls):
        if f.toml.endswith("-flags"):
            for flag in getattr(spec, f.name):
                problem = flags.path_problem(flag, root)
                if problem:
                    raise validator.error((*table, f.toml), f"{problem[0]} ({STRICTER}{_ESCAPES})", problem[1])


def _check_folder_name(path: Path) -> None:
    """The kernel folder's name is written into the generated project and build paths."""
    folder = path.resolve().parent
    problem = flags.name_problem(folder.name)
    if problem:
        raise ManifestError(
            f"the kernel folder {problem[0]}",
            file=path,
            line=None,
            fix=f"{problem[1]} (the folder {show(str(folder), 120)})",
        )


def _check_backend_keys(validator: Validator, spec: KernelSpec, raw: dict[str, Any]) -> None:
    for f in fields_of(KernelSpec):
        owner = registry.owner_of(f.name)
        if owner is not None and f.toml in raw and spec.backend != owner.name:
            raise validator.error(
                ("kernel", spec.name, f.toml),
                f"applies to backend `{owner.name}` only, this kernel is `{spec.backend}`",
                f"remove `{f.toml}`",
            )


def _check_backends(validator: Validator, general: General, kernels: dict[str, KernelSpec], *, noarch: bool) -> None:
    if not general.backends:
        raise validator.error(
            ("general", "backends"),
            f"backends is empty ({STRICTER}a kernel that builds for no backend is a mistake)",
            'list at least one backend, e.g. ["cuda"]',
        )
    for spec in kernels.values():
        if spec.backend not in general.backends:
            raise validator.error(
                ("kernel", spec.name, "backend"),
                f"backend `{spec.backend}` is not listed in [general] backends ({STRICTER}"
                "kernel-builder would silently skip this table)",
                f'add "{spec.backend}" to [general] backends',
            )
    if noarch:
        return
    for backend in general.backends:
        if not any(k.backend == backend for k in kernels.values()):
            raise validator.error(
                ("general", "backends"),
                f"backend `{backend}` has no [kernel.*] table ({STRICTER}"
                "a compiled kernel needs sources for each backend it claims)",
                f'add a [kernel.<name>] table with backend = "{backend}", or remove `{backend}` from backends',
            )


def _check_sources(validator: Validator, root: Path, table: tuple[str, ...], files: list[str]) -> None:
    for rel in files:
        try:
            exists = (root / rel).exists()
        except OSError as exc:
            raise validator.error(
                (*table, "src"), f"`{show(rel)}` cannot be read: {exc.strerror}", "fix the path"
            ) from None
        if not exists:
            close = closest(rel, _kernel_files(root))
            hint = f"did you mean `{show(close)}`? Else " if close else ""
            raise validator.error(
                (*table, "src"),
                f"`{show(rel)}` does not exist ({STRICTER}kernel-builder finds it missing only when it builds)",
                f"{hint}create {show(str(root / rel), 120)} or remove it from `src`",
            )


def _kernel_files(root: Path, limit: int = 5000) -> list[str]:
    """Paths of the kernel's files relative to it (not those of build/ or hidden folders), to
    suggest for a misspelt one; at most `limit`."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        top = Path(folder) == root
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (top and d == "build"))
        found += (Path(folder, f).relative_to(root).as_posix() for f in sorted(files))
        if len(found) >= limit:
            break
    return found[:limit]


def upgrade_file(kernel_dir: Path, *, license: str | None = None) -> str:
    """Rewrite build.toml as edition 5, keeping comments and layout; return the new text."""
    import tomlkit

    path = manifest_path(kernel_dir)
    text = read_text(path)
    raw = parse_toml(text, path)
    edition = detect_edition(raw, Validator(path, text))
    if edition == CURRENT_EDITION:
        return text
    upgraded = upgrade_data(raw, edition, license=license)
    if "license" not in upgraded["general"]:
        raise ManifestError(
            "build.toml has no license, and the upgrade cannot invent one",
            file=path,
            line=SourceMap(text).line(("general",)),
            fix="pass --license <SPDX id>, e.g. `kbuild update-build --license MIT <dir>`",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validate(raw, path, text, license=license)
    doc = tomlkit.parse(text)
    general = doc["general"]
    if "universal" in general:
        del general["universal"]
    for name in ("version", "edition", "license", "backends"):
        if name not in general:
            general[name] = upgraded["general"][name]
    general["edition"] = CURRENT_EDITION
    if "torch-noarch" in upgraded and "torch-noarch" not in doc:
        if "torch" in doc:
            del doc["torch"]
        doc["torch-noarch"] = tomlkit.table()
    new_text = tomlkit.dumps(doc)
    validate(parse_toml(new_text, path), path, new_text)
    path.write_text(new_text, encoding="utf-8")
    return new_text
