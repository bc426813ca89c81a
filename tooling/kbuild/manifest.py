"""build.toml: parse, validate and upgrade a kernel's manifest into typed objects.

Edition 5 is the current schema. Files without an `edition` key are edition 4 and are
upgraded in memory; the 2025 format (`[general] universal = ...`) is edition 2 and is
upgraded in memory too, with a warning that says what to add. `upgrade_file` persists it.
"""

from __future__ import annotations

import difflib
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from kbuild.errors import KbuildError

CURRENT_EDITION = 5
BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu")
EXPERIMENTAL_BACKENDS = ("cann", "neuron", "tpu")
FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")
NAME_PATTERN = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
PYTHON_DEPENDS = ("einops", "helion", "tvm-ffi")
CUDA_PYTHON_DEPENDS = ("nvidia-cutlass-dsl",)
XPU_PYTHON_DEPENDS = ("onednn",)
CUTLASS_DEPENDS = tuple(
    f"cutlass_{v}" for v in ("2_10", "3_5", "3_6", "3_8", "3_9", "4_0", "4_1", "4_2", "4_3", "4_4", "4_5")
)
KERNEL_DEPENDS = ("torch", *CUTLASS_DEPENDS, "sycl_tla", "metal-cpp")
CAPABILITY_PATTERN = re.compile(r"^\d+\.\d+[af]?(\+PTX)?$")
ROCM_ARCH_PATTERN = re.compile(r"^gfx[0-9a-f]+$")
VERSION_PATTERN = re.compile(r"^\d+(\.\d+)*$")

STR, INT, BOOL, STR_LIST, TABLE_LIST, ANY_TABLE = (
    "string",
    "integer",
    "boolean",
    "list of strings",
    "list of tables",
    "table",
)
STR_OR_TABLE = "string or table"

GENERAL_KEYS = {
    "name": STR,
    "version": INT,
    "edition": INT,
    "license": STR,
    "backends": STR_LIST,
    "upstream": STR,
    "source": STR,
    "python-depends": STR_LIST,
    "kernel-depends": TABLE_LIST,
    "hub": ANY_TABLE,
    "cuda": ANY_TABLE,
    "xpu": ANY_TABLE,
}
HUB_KEYS = {"repo-id": STR, "branch": STR}
GENERAL_CUDA_KEYS = {"minver": STR, "maxver": STR, "python-depends": STR_LIST, "kernel-depends": TABLE_LIST}
GENERAL_XPU_KEYS = {"python-depends": STR_LIST}
KERNEL_DEPENDENCY_KEYS = {"repo-id": STR, "version": INT, "revision": STR}
TORCH_KEYS = {
    "src": STR_LIST,
    "include": STR_LIST,
    "pyext": STR_LIST,
    "minver": STR,
    "maxver": STR,
    "cxx-flags": STR_LIST,
    "stable-abi": STR_OR_TABLE,
}
NOARCH_KEYS = {"pyext": STR_LIST, "cuda_capabilities": STR_LIST, "rocm_archs": STR_LIST}
TVM_FFI_KEYS = {"src": STR_LIST, "include": STR_LIST, "pyext": STR_LIST, "cxx-flags": STR_LIST}
KERNEL_KEYS = {
    "backend": STR,
    "depends": STR_LIST,
    "src": STR_LIST,
    "include": STR_LIST,
    "cxx-flags": STR_LIST,
    "cuda-capabilities": STR_LIST,
    "cuda-flags": STR_LIST,
    "cuda-minver": STR,
    "rocm-archs": STR_LIST,
    "hip-flags": STR_LIST,
    "sycl-flags": STR_LIST,
}
BACKEND_ONLY_KEYS = {
    "cuda-capabilities": "cuda",
    "cuda-flags": "cuda",
    "cuda-minver": "cuda",
    "rocm-archs": "rocm",
    "hip-flags": "rocm",
    "sycl-flags": "xpu",
}
TOP_LEVEL_KEYS = {"general": ANY_TABLE, "kernel": ANY_TABLE, **{f: ANY_TABLE for f in FRAMEWORKS}}

# What edition 2 (the 2025 guides' format) lacks, in the words a user needs.
EDITION_2_HINT = (
    "this build.toml uses the 2025 format (edition 2). Add to [general]: "
    'edition = 5, version = 1, license = "<SPDX id>", backends = {backends}; '
    "remove `universal` (a universal kernel becomes a [torch-noarch] table). "
    "`kbuild update-build {kernel_dir}` writes this for you."
)


@dataclass(frozen=True)
class KernelSpec:
    name: str
    backend: str
    depends: list[str]
    src: list[str]
    include: list[str] = field(default_factory=list)
    cxx_flags: list[str] = field(default_factory=list)
    cuda_capabilities: list[str] = field(default_factory=list)
    cuda_flags: list[str] = field(default_factory=list)
    cuda_minver: str | None = None
    rocm_archs: list[str] = field(default_factory=list)
    hip_flags: list[str] = field(default_factory=list)
    sycl_flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TorchSpec:
    src: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    pyext: list[str] = field(default_factory=lambda: ["py", "pyi"])
    minver: str | None = None
    maxver: str | None = None
    cxx_flags: list[str] = field(default_factory=list)
    stable_abi: str | dict[str, str] | None = None

    def stable_abi_for(self, backend: str) -> str | None:
        if isinstance(self.stable_abi, dict):
            return self.stable_abi.get(backend)
        return self.stable_abi


@dataclass(frozen=True)
class NoarchSpec:
    pyext: list[str] = field(default_factory=lambda: ["py", "pyi"])
    cuda_capabilities: list[str] = field(default_factory=list)
    rocm_archs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class General:
    name: str
    version: int
    edition: int
    license: str
    backends: list[str]
    upstream: str | None = None
    source: str | None = None
    python_depends: list[str] = field(default_factory=list)
    kernel_depends: list[dict[str, Any]] = field(default_factory=list)
    hub_repo_id: str | None = None
    hub_branch: str | None = None
    cuda_minver: str | None = None
    cuda_maxver: str | None = None
    cuda_python_depends: list[str] = field(default_factory=list)
    xpu_python_depends: list[str] = field(default_factory=list)


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
        return self.general.hub_repo_id or f"kernels-community/{self.general.name}"

    @property
    def upload_branch(self) -> str:
        return self.general.hub_branch or f"v{self.general.version}"

    @property
    def is_noarch(self) -> bool:
        return self.framework == "torch-noarch"

    def kernels_for(self, backend: str) -> list[KernelSpec]:
        return [k for k in self.kernels.values() if k.backend == backend]

    def python_depends_for(self, backend: str) -> list[str]:
        extra = {"cuda": self.general.cuda_python_depends, "xpu": self.general.xpu_python_depends}
        return sorted({*self.general.python_depends, *extra.get(backend, [])})


def load_manifest(kernel_dir: Path | str) -> Manifest:
    """Read and validate `<kernel_dir>/build.toml`; raise KbuildError on any problem."""
    path = Path(kernel_dir) / "build.toml"
    if not path.is_file():
        raise KbuildError(
            "no build.toml here",
            file=path,
            fix="run kbuild in a kernel folder (kernels/<name>) or create one with `kbuild init`",
        )
    text = path.read_text(encoding="utf-8")
    data = parse_toml(text, path)
    return _Validator(path, text).manifest(data)


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise KbuildError(
            f"invalid TOML: {exc}",
            file=path,
            where=match.group(1) if match else None,
            fix="correct the TOML syntax at that line (quotes, brackets, `key = value`)",
        ) from None


def detect_edition(data: dict[str, Any]) -> int:
    general = data.get("general", {})
    if isinstance(general, dict):
        if "edition" in general:
            return general["edition"]
        if "universal" in general:
            return 2
    return 4


def upgrade_data(data: dict[str, Any], *, path: Path, license: str | None = None) -> dict[str, Any]:
    """Return edition-5 data for an edition 2 or 4 build.toml (the input is not changed)."""
    edition = detect_edition(data)
    if edition == CURRENT_EDITION:
        return data
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    general = data.setdefault("general", {})
    kernel_backends = sorted(
        {k.get("backend") for k in data.get("kernel", {}).values() if isinstance(k, dict) and k.get("backend")}
    )
    if edition == 2:
        universal = general.pop("universal", False)
        if universal:
            data.pop("torch", None)
            data["torch-noarch"] = {}
            general.setdefault("backends", ["cpu", "cuda"] if not kernel_backends else kernel_backends)
    general.setdefault("backends", kernel_backends)
    general.setdefault("version", 1)
    if license is not None:
        general["license"] = license
    general["edition"] = CURRENT_EDITION
    return data


def upgrade_warning(data: dict[str, Any], kernel_dir: Path) -> str:
    edition = detect_edition(data)
    upgraded = upgrade_data(data, path=kernel_dir / "build.toml")
    backends = "[" + ", ".join(f'"{b}"' for b in upgraded["general"].get("backends", [])) + "]"
    if edition == 2:
        return f"{kernel_dir / 'build.toml'}: " + EDITION_2_HINT.format(backends=backends, kernel_dir=kernel_dir)
    return (
        f"{kernel_dir / 'build.toml'}: no `edition` key, reading it as edition 4 and upgrading in memory; "
        f"add `edition = 5` to [general] (`kbuild update-build {kernel_dir}` does it)"
    )


class _Validator:
    """Validates the parsed TOML of one file, with precise locations in errors."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.lines = text.splitlines()

    # -- locating keys in the source text ------------------------------------------------
    def line_of(self, table: str, key: str | None = None) -> int | None:
        header = re.compile(r"^\s*\[\s*" + re.escape(table).replace(r"\.", r"\s*\.\s*") + r"\s*\]")
        start = next((i for i, line in enumerate(self.lines) if header.match(line)), None)
        if start is None:
            return None
        if key is None:
            return start + 1
        key_re = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
        for i in range(start + 1, len(self.lines)):
            if re.match(r"^\s*\[", self.lines[i]):
                break
            if key_re.match(self.lines[i]):
                return i + 1
        return start + 1

    def fail(self, message: str, table: str, key: str | None = None, fix: str | None = None):
        line = self.line_of(table, key)
        where = f"{line}" if line else ""
        path = f"[{table}]" + (f" {key}" if key else "")
        raise KbuildError(f"{path}: {message}", file=self.path, where=where, fix=fix)

    # -- generic checks -------------------------------------------------------------------
    def check_keys(self, table: str, values: dict[str, Any], schema: dict[str, str]) -> None:
        for key, value in values.items():
            if key not in schema:
                close = difflib.get_close_matches(key, list(schema), n=1)
                hint = f"did you mean `{close[0]}`?" if close else f"allowed keys: {', '.join(schema)}"
                self.fail(f"unknown key `{key}`", table, key, fix=hint)
            self.check_type(table, key, value, schema[key])

    def check_type(self, table: str, key: str, value: Any, kind: str) -> None:
        ok = {
            STR: isinstance(value, str),
            INT: isinstance(value, int) and not isinstance(value, bool),
            BOOL: isinstance(value, bool),
            STR_LIST: isinstance(value, list) and all(isinstance(v, str) for v in value),
            TABLE_LIST: isinstance(value, list) and all(isinstance(v, dict) for v in value),
            ANY_TABLE: isinstance(value, dict),
            STR_OR_TABLE: isinstance(value, (str, dict)),
        }[kind]
        if not ok:
            self.fail(
                f"expected a {kind}, got {type(value).__name__} {value!r}",
                table,
                key,
                fix=f"write `{key}` as a {kind}",
            )

    def require(self, table: str, values: dict[str, Any], key: str, example: str) -> Any:
        if key not in values:
            self.fail(f"missing required key `{key}`", table, None, fix=f"add `{key} = {example}` to [{table}]")
        return values[key]

    def check_choices(self, table: str, key: str, values: list[str], allowed: tuple[str, ...]) -> None:
        for value in values:
            if value not in allowed:
                close = difflib.get_close_matches(value, allowed, n=1)
                hint = f"did you mean `{close[0]}`? " if close else ""
                self.fail(f"unknown value `{value}`", table, key, fix=f"{hint}allowed: {', '.join(allowed)}")

    def check_files(self, table: str, key: str, files: list[str]) -> None:
        root = self.path.parent
        for rel in files:
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                self.fail(
                    f"`{rel}` must be a path inside the kernel folder",
                    table,
                    key,
                    fix="use a relative path without `..`",
                )
            if not (root / rel).exists():
                self.fail(f"`{rel}` does not exist", table, key, fix=f"create {root / rel} or remove it from `{key}`")

    # -- the manifest ---------------------------------------------------------------------
    def manifest(self, raw: dict[str, Any]) -> Manifest:
        source_edition = detect_edition(raw)
        if source_edition not in (2, 4, CURRENT_EDITION):
            self.fail(
                f"unsupported edition {source_edition!r}", "general", "edition", fix=f"use edition = {CURRENT_EDITION}"
            )
        if source_edition != CURRENT_EDITION:
            warnings.warn(upgrade_warning(raw, self.path.parent), stacklevel=3)
            if source_edition == 2 and "license" not in raw.get("general", {}):
                raw = upgrade_data(raw, path=self.path, license="NOASSERTION")
            else:
                raw = upgrade_data(raw, path=self.path)
        for key, value in raw.items():
            if key not in TOP_LEVEL_KEYS:
                close = difflib.get_close_matches(key, list(TOP_LEVEL_KEYS), n=1)
                raise KbuildError(
                    f"unknown table `[{key}]`",
                    file=self.path,
                    where=self.line_of(key) or "",
                    fix=f"did you mean `[{close[0]}]`?" if close else f"allowed tables: {', '.join(TOP_LEVEL_KEYS)}",
                )
            self.check_type(key, key, value, ANY_TABLE)
        if "general" not in raw:
            raise KbuildError(
                "missing table [general]",
                file=self.path,
                fix="add [general] with name, version, edition, license and backends",
            )
        general = self.general(raw["general"])
        frameworks = [f for f in FRAMEWORKS if f in raw]
        if len(frameworks) != 1:
            found = ", ".join(f"[{f}]" for f in frameworks) or "none"
            raise KbuildError(
                f"exactly one framework table is required, found {found}",
                file=self.path,
                fix="keep one of [torch] (compiled), [torch-noarch] (pure Python/Triton) or [tvm-ffi]",
            )
        framework = frameworks[0]
        torch = noarch = None
        if framework == "torch":
            torch = self.torch(raw["torch"])
        elif framework == "torch-noarch":
            noarch = self.noarch(raw["torch-noarch"])
        else:
            self.check_keys("tvm-ffi", raw["tvm-ffi"], TVM_FFI_KEYS)
            torch = TorchSpec(**{k.replace("-", "_"): v for k, v in raw["tvm-ffi"].items()})
        kernels = {name: self.kernel(name, table) for name, table in raw.get("kernel", {}).items()}
        if framework != "torch-noarch":
            for backend in general.backends:
                if not any(k.backend == backend for k in kernels.values()):
                    raise KbuildError(
                        f"[general] backends: backend `{backend}` has no [kernel.*] table",
                        file=self.path,
                        where=self.line_of("general", "backends") or "",
                        fix=f'add a [kernel.<name>] table with backend = "{backend}", '
                        f"or remove `{backend}` from backends",
                    )
        for spec in kernels.values():
            if spec.backend not in general.backends:
                self.fail(
                    f"backend `{spec.backend}` is not listed in [general] backends",
                    f"kernel.{spec.name}",
                    "backend",
                    fix=f'add "{spec.backend}" to [general] backends',
                )
        return Manifest(self.path, general, framework, torch, noarch, kernels, source_edition)

    def general(self, values: dict[str, Any]) -> General:
        self.check_keys("general", values, GENERAL_KEYS)
        name = self.require("general", values, "name", '"my-kernel"')
        if not NAME_PATTERN.match(name):
            self.fail(
                f"invalid name `{name}`",
                "general",
                "name",
                fix="use lowercase letters, digits and `-`, starting with a letter",
            )
        version = self.require("general", values, "version", "1")
        if version < 1:
            self.fail(f"version must be >= 1, got {version}", "general", "version", fix="set version = 1")
        edition = self.require("general", values, "edition", str(CURRENT_EDITION))
        license_ = self.require("general", values, "license", '"Apache-2.0"')
        backends = self.require("general", values, "backends", '["cpu", "cuda"]')
        if not backends:
            self.fail("backends is empty", "general", "backends", fix='list at least one backend, e.g. ["cuda"]')
        self.check_choices("general", "backends", backends, BACKENDS + EXPERIMENTAL_BACKENDS)
        self.check_choices("general", "python-depends", values.get("python-depends", []), PYTHON_DEPENDS)
        hub = values.get("hub", {})
        self.check_keys("general.hub", hub, HUB_KEYS)
        cuda = values.get("cuda", {})
        self.check_keys("general.cuda", cuda, GENERAL_CUDA_KEYS)
        self.check_choices("general.cuda", "python-depends", cuda.get("python-depends", []), CUDA_PYTHON_DEPENDS)
        for key in ("minver", "maxver"):
            if key in cuda and not VERSION_PATTERN.match(cuda[key]):
                self.fail(f"`{cuda[key]}` is not a version", "general.cuda", key, fix='write it as "12.6"')
        xpu = values.get("xpu", {})
        self.check_keys("general.xpu", xpu, GENERAL_XPU_KEYS)
        self.check_choices("general.xpu", "python-depends", xpu.get("python-depends", []), XPU_PYTHON_DEPENDS)
        kernel_depends = [*values.get("kernel-depends", []), *cuda.get("kernel-depends", [])]
        for dep in kernel_depends:
            self.kernel_dependency(dep)
        return General(
            name=name,
            version=version,
            edition=edition,
            license=license_,
            backends=list(backends),
            upstream=values.get("upstream"),
            source=values.get("source"),
            python_depends=list(values.get("python-depends", [])),
            kernel_depends=kernel_depends,
            hub_repo_id=hub.get("repo-id"),
            hub_branch=hub.get("branch"),
            cuda_minver=cuda.get("minver"),
            cuda_maxver=cuda.get("maxver"),
            cuda_python_depends=list(cuda.get("python-depends", [])),
            xpu_python_depends=list(xpu.get("python-depends", [])),
        )

    def kernel_dependency(self, dep: dict[str, Any]) -> None:
        self.check_keys("general", dep, KERNEL_DEPENDENCY_KEYS)
        if "repo-id" not in dep or ("version" in dep) == ("revision" in dep):
            self.fail(
                f"kernel dependency {dep!r} is incomplete",
                "general",
                "kernel-depends",
                fix='write { repo-id = "org/name", version = 1 } or { repo-id = "org/name", revision = "<rev>" }',
            )

    def torch(self, values: dict[str, Any]) -> TorchSpec:
        self.check_keys("torch", values, TORCH_KEYS)
        self.check_files("torch", "src", values.get("src", []))
        for key in ("minver", "maxver"):
            if key in values and not VERSION_PATTERN.match(values[key]):
                self.fail(f"`{values[key]}` is not a version", "torch", key, fix='write it as "2.12"')
        stable = values.get("stable-abi")
        if isinstance(stable, dict):
            self.check_choices("torch", "stable-abi", list(stable), BACKENDS)
        return TorchSpec(**{k.replace("-", "_"): v for k, v in values.items()})

    def noarch(self, values: dict[str, Any]) -> NoarchSpec:
        self.check_keys("torch-noarch", values, NOARCH_KEYS)
        return NoarchSpec(**values)

    def kernel(self, name: str, values: dict[str, Any]) -> KernelSpec:
        table = f"kernel.{name}"
        self.check_type("kernel", name, values, ANY_TABLE)
        self.check_keys(table, values, KERNEL_KEYS)
        backend = self.require(table, values, "backend", '"cuda"')
        self.check_choices(table, "backend", [backend], BACKENDS + EXPERIMENTAL_BACKENDS)
        depends = self.require(table, values, "depends", '["torch"]')
        self.check_choices(table, "depends", depends, KERNEL_DEPENDS)
        src = self.require(table, values, "src", '["my_kernel/kernel.cu"]')
        self.check_files(table, "src", src)
        for key, only in BACKEND_ONLY_KEYS.items():
            if key in values and backend != only:
                self.fail(
                    f"`{key}` applies to backend `{only}` only, this kernel is `{backend}`",
                    table,
                    key,
                    fix=f"remove `{key}`",
                )
        for cap in values.get("cuda-capabilities", []):
            if not CAPABILITY_PATTERN.match(cap):
                self.fail(
                    f"invalid CUDA capability `{cap}`",
                    table,
                    "cuda-capabilities",
                    fix='use values like "8.0", "9.0a", "10.0+PTX"',
                )
        for arch in values.get("rocm-archs", []):
            if not ROCM_ARCH_PATTERN.match(arch):
                self.fail(f"invalid ROCm arch `{arch}`", table, "rocm-archs", fix='use values like "gfx942"')
        return KernelSpec(name=name, **{k.replace("-", "_"): v for k, v in values.items()})


def upgrade_file(kernel_dir: Path, *, license: str | None = None) -> str:
    """Rewrite build.toml as edition 5, keeping comments and layout; return the new text."""
    import tomlkit

    path = Path(kernel_dir) / "build.toml"
    if not path.is_file():
        raise KbuildError("no build.toml here", file=path, fix="pass a kernel folder")
    text = path.read_text(encoding="utf-8")
    raw = parse_toml(text, path)
    edition = detect_edition(raw)
    if edition == CURRENT_EDITION:
        return text
    upgraded = upgrade_data(raw, path=path, license=license)
    if "license" not in upgraded["general"]:
        raise KbuildError(
            "build.toml has no license, and the upgrade cannot invent one",
            file=path,
            where="[general]",
            fix="pass --license <SPDX id>, e.g. `kbuild update-build --license MIT <dir>`",
        )
    doc = tomlkit.parse(text)
    general = doc["general"]
    if "universal" in general:
        del general["universal"]
    for key in ("version", "edition", "license", "backends"):
        if key not in general:
            general[key] = upgraded["general"][key]
    general["edition"] = CURRENT_EDITION
    if "torch-noarch" in upgraded and "torch-noarch" not in doc:
        if "torch" in doc:
            del doc["torch"]
        doc["torch-noarch"] = tomlkit.table()
    new_text = tomlkit.dumps(doc)
    _Validator(path, new_text).manifest(parse_toml(new_text, path))
    path.write_text(new_text, encoding="utf-8")
    return new_text
