"""ROCm device code without a ROCm GPU: hipify CUDA sources, compile them device-only with clang
for each `rocm-archs` entry, and check the assembly for the instructions a fast path needs.

The only module that runs clang or hipify. Toolchain: Debian's clang-19 with the HIP headers
(`apt-get install clang-19 lld-19 libamdhip64-dev rocm-device-libs`). Device-only compiles use
`-nogpulib`, so nothing is linked against the ROCm device libraries (Debian's lack gfx942): the
output is assembly plus an unlinked code object assembled from it. Headers newer than Debian's
HIP 5.2.3 that hipified code needs get stand-ins from data/rocm_compat/ (searched last, so a
real ROCm install's headers win). Nothing here runs the code.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kbuild.build.ninja import first_error
from kbuild.core import paths
from kbuild.core.errors import KbuildError
from kbuild.model.backends import ROCM
from kbuild.model.manifest import KernelSpec, Manifest

CLANG = "clang++-19"
ASSEMBLER = "llvm-mc-19"
APT_INSTALL = "apt-get install -y clang-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs"
DEVICE_FLAGS = [
    "-x",
    "hip",
    "-std=c++17",
    "--cuda-device-only",
    "-nogpulib",
    "-O3",
    "-DROCM_KERNEL",
]
HIPIFIED_SUFFIXES = {".cu": ".hip", ".cuh": ".cuh"}  # CUDA sources and headers hipify renames
FP8_MFMA_PATTERN = r"v_mfma_f32_\w+_fp8_fp8"
# Stand-ins for HIP headers newer than Debian's HIP 5.2.3 (searched after the real ones).
COMPAT_INCLUDE = Path(__file__).parents[1] / "data" / "rocm_compat"
HIPIFY_BREADCRUMB = "// hipified by kbuild.build.rocm from {source}: edit the CUDA source, not this file\n"

_FUNCTION_TYPE = re.compile(r"^\s*\.type\s+([^,\s]+)\s*,\s*@function")
_LABEL = re.compile(r"^([^\s:;]+):")


@dataclass(frozen=True)
class CompiledObject:
    """One source of one `[kernel.*]` compiled device-only for one GPU architecture."""

    kernel: str
    arch: str
    source: Path  # the kernel's own source (the .cu, not its hipified copy)
    asm: Path
    obj: Path

    def asm_text(self) -> str:
        return self.asm.read_text(encoding="utf-8")


@dataclass
class AsmFunction:
    name: str
    mnemonics: Counter[str] = field(default_factory=Counter)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise KbuildError(
            f"{name} not found on PATH (needed to compile ROCm device code)",
            fix=f"{APT_INSTALL} (Debian 12 / Ubuntu 24.04)",
        )
    return path


@functools.lru_cache(maxsize=1)
def _torch_hipify() -> ModuleType:
    try:
        from torch.utils.hipify import hipify_python
    except ImportError as exc:
        raise KbuildError(
            f"cannot import torch.utils.hipify ({exc})",
            fix="install torch (its CPU wheel includes torch.utils.hipify)",
        ) from exc
    for name in (
        "RE_PYTORCH_PREPROCESSOR",
        "PYTORCH_MAP",
        "replace_math_functions",
        "hip_header_magic",
    ):
        if not hasattr(hipify_python, name):
            raise KbuildError(
                f"this torch's torch.utils.hipify has no {name}; kbuild.build.rocm.hipify relies on it",
                fix="use a torch release from 2.4 on, or update kbuild/rocm.py for this torch",
            )
    return hipify_python


def hipify(src: Path, dst: Path) -> Path:
    """Write the HIP translation of the CUDA source `src` to `dst` (rewritten only when its text
    changes, so incremental builds stay incremental). Uses torch.utils.hipify's CUDA -> HIP map."""
    hipify_python = _torch_hipify()
    try:
        text = Path(src).read_text(encoding="utf-8")
    except OSError as exc:
        raise KbuildError(
            f"cannot read the CUDA source to hipify: {exc.strerror}",
            file=src,
            fix="check the kernel's src list in build.toml",
        ) from exc
    text = hipify_python.RE_PYTORCH_PREPROCESSOR.sub(lambda m: hipify_python.PYTORCH_MAP[m.group(0)], text)
    if Path(src).suffix in HIPIFIED_SUFFIXES:
        text = hipify_python.replace_math_functions(text)
    text = HIPIFY_BREADCRUMB.format(source=Path(src).name) + hipify_python.hip_header_magic(text)
    dst = Path(dst)
    if not dst.is_file() or dst.read_text(encoding="utf-8") != text:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text, encoding="utf-8")
    return dst


def _hipified_tree(kernel_dir: Path, spec: KernelSpec, tree: Path) -> dict[Path, Path]:
    """Hipify the kernel's .cu/.cuh files into `tree` at their relative paths (so their own
    includes of each other resolve there first); map each device source to what clang compiles."""
    sources: dict[Path, Path] = {}
    for rel in spec.src:
        path = kernel_dir / rel
        if path.suffix in HIPIFIED_SUFFIXES:
            hipified = hipify(path, tree / Path(rel).with_suffix(HIPIFIED_SUFFIXES[path.suffix]))
            if path.suffix == ".cu":
                sources[path] = hipified
        elif path.suffix == ".hip":
            sources[path] = path
    return sources


def _compile_one(
    source: Path,
    compiled: Path,
    arch: str,
    include_dirs: list[Path],
    flags: list[str],
    asm: Path,
    obj: Path,
) -> None:
    command = [
        _tool(CLANG),
        *DEVICE_FLAGS,
        f"--offload-arch={arch}",
        *(f"-I{d}" for d in include_dirs),
        *flags,
        "-idirafter",
        str(COMPAT_INCLUDE),
        "-S",
        str(compiled),
        "-o",
        str(asm),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise compile_error(result.stderr, source, compiled, arch)
    command = [
        _tool(ASSEMBLER),
        "-triple=amdgcn-amd-amdhsa",
        f"-mcpu={arch}",
        "-filetype=obj",
        str(asm),
        "-o",
        str(obj),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise KbuildError(
            f"{ASSEMBLER} rejected the assembly clang wrote for {arch}:\n{_tail(result.stderr)}",
            file=asm,
            fix=f"a toolchain mismatch: install clang-19 and llvm-19 together ({APT_INSTALL})",
        )


def compile_error(stderr: str, source: Path, compiled: Path, arch: str) -> KbuildError:
    """clang's failure to compile `source` (as `compiled`, its hipified copy for a .cu) for `arch`:
    its first error, at its file and line, with the lines clang printed with it, and a fix that
    fits that error."""
    lines = stderr.strip().splitlines()
    starts = [index for index, text in enumerate(lines) if first_error([text]) is not None]
    found = first_error(lines)
    if found is None:  # an error of the driver (an unknown arch or option), not of a file
        return KbuildError(
            f"{CLANG} failed to compile {source.name} for {arch}:\n{_tail(stderr)}",
            file=source,
            fix=_fix(stderr, arch, None),
        )
    file, line, message = found
    where = source if Path(file) == compiled else Path(file)
    block = lines[starts[0] : starts[1] if len(starts) > 1 else len(lines)]  # the error, its notes and code
    more = f"\n({len(starts) - 1} more error{'s' if len(starts) > 2 else ''} after it)" if len(starts) > 1 else ""
    return KbuildError(
        f"{CLANG} failed to compile {source.name} for {arch}; first error: {message}\n{_tail(chr(10).join(block))}"
        + more,
        file=where,
        where=line,
        fix=_fix(message, arch, f"{where.name}:{line}"),
    )


def _fix(message: str, arch: str, place: str | None) -> str:
    """The fix for clang's error `message` (at `place`, when it names a file and line)."""
    header = re.search(r"'([^']+)' file not found", message)
    if header and header[1].endswith("hip_runtime.h"):
        return f"install the HIP headers: {APT_INSTALL}"
    if header:
        return (
            f"`{header[1]}` is on no include path: it belongs to a library the kernel uses; add the folder that "
            "holds it to the kernel's `include` in build.toml, or vendor the library in the kernel folder"
        )
    if "invalid target ID" in message or "unknown target CPU" in message:
        return f"{CLANG} does not know {arch}: use a newer clang, or drop {arch} from rocm-archs"
    if place is None or "unknown argument" in message:
        return "check the kernel's hip-flags in build.toml"
    return f"fix the code at {place}"


def _tail(text: str, lines: int = 30) -> str:
    kept = text.strip().splitlines()
    return "\n".join(kept[-lines:] if len(kept) > lines else kept)


def compile_device_only(
    manifest: Manifest, out_dir: Path, kernels: Iterable[str] | None = None
) -> list[CompiledObject]:
    """Compile every `[kernel.*]` with backend "rocm" (or those named in `kernels`), each .cu
    (hipified) and .hip source, for each of its rocm-archs, into `out_dir/<kernel>/<arch>/`."""
    wanted = set(kernels) if kernels is not None else None
    specs = [s for s in manifest.kernels.values() if s.backend == ROCM.name and (wanted is None or s.name in wanted)]
    if wanted is not None and wanted - {s.name for s in specs}:
        missing = ", ".join(sorted(wanted - {s.name for s in specs}))
        raise KbuildError(
            f'no [kernel.{missing}] with backend = "rocm"',
            file=manifest.path,
            fix="name a ROCm kernel of this build.toml",
        )
    if not specs:
        raise KbuildError(
            'no [kernel.*] with backend = "rocm" to compile',
            file=manifest.path,
            fix='add a [kernel.<name>] with backend = "rocm" and rocm-archs = ["gfx942"]',
        )
    kernel_dir = manifest.kernel_dir
    out_dir = Path(out_dir)
    compiled: list[CompiledObject] = []
    for spec in specs:
        if not spec.rocm_archs:
            raise KbuildError(
                "no rocm-archs to compile for",
                file=manifest.path,
                where=f"kernel.{spec.name}",
                fix='add rocm-archs = ["gfx942"] (MI300)',
            )
        tree = out_dir / spec.name / "hipified"
        sources = _hipified_tree(kernel_dir, spec, tree)
        if not sources:
            raise KbuildError(
                "no .cu or .hip source to compile",
                file=manifest.path,
                where=f"kernel.{spec.name}",
                fix="list the kernel's .hip (or .cu) files in its src",
            )
        include_dirs = [tree, kernel_dir, *(kernel_dir / d for d in spec.include)]
        for arch in spec.rocm_archs:
            arch_dir = out_dir / spec.name / arch
            arch_dir.mkdir(parents=True, exist_ok=True)
            for source, to_compile in sources.items():
                stem = source.relative_to(kernel_dir).with_suffix("").as_posix().replace("/", "__")
                asm, obj = arch_dir / f"{stem}.s", arch_dir / f"{stem}.o"
                _compile_one(
                    source,
                    to_compile,
                    arch,
                    [to_compile.parent, *include_dirs],
                    spec.hip_flags,
                    asm,
                    obj,
                )
                compiled.append(CompiledObject(spec.name, arch, source, asm, obj))
    return compiled


def asm_functions(asm_text: str) -> dict[str, AsmFunction]:
    """The functions of an AMDGPU assembly listing and the instruction mnemonics each contains."""
    names = {m.group(1) for m in map(_FUNCTION_TYPE.match, asm_text.splitlines()) if m}
    functions: dict[str, AsmFunction] = {}
    current: AsmFunction | None = None
    for line in asm_text.splitlines():
        label = _LABEL.match(line)
        if label:
            if label.group(1) in names:
                current = functions.setdefault(label.group(1), AsmFunction(label.group(1)))
            elif label.group(1).startswith(".Lfunc_end"):
                current = None
            continue
        stripped = line.strip()
        if current is None or not stripped or stripped[0] in ".;":
            continue
        current.mnemonics[stripped.split()[0]] += 1
    return functions


def check_mfma(
    asm_text: str,
    required_patterns: Iterable[str] = (FP8_MFMA_PATTERN,),
    *,
    function_pattern: str = "",
    source: Path | None = None,
) -> dict[str, dict[str, int]]:
    """Every function whose symbol matches `function_pattern` (every function when empty) must
    contain an instruction matching each of `required_patterns` (regexes on the mnemonic).
    Returns {function: {mnemonic: count}} of the matching instructions; raises KbuildError
    naming the functions that lack one (a fast path that silently fell back to scalar code)."""
    patterns = [re.compile(p) for p in required_patterns]
    selected = {name: f for name, f in asm_functions(asm_text).items() if re.search(function_pattern, name)}
    if not selected:
        raise KbuildError(
            f"no function matching {function_pattern!r} in the assembly",
            file=source,
            fix="check the function name (symbols are mangled: match a part of the name)",
        )
    found: dict[str, dict[str, int]] = {}
    missing: list[str] = []
    for name, function in sorted(selected.items()):
        found[name] = {m: n for m, n in function.mnemonics.items() if any(p.search(m) for p in patterns)}
        missing += [f"{name} lacks {p.pattern}" for p in patterns if not any(p.search(m) for m in found[name])]
    if missing:
        raise KbuildError(
            "required instructions are missing from the fast path:\n  " + "\n  ".join(missing),
            file=source,
            fix="the code fell back to other instructions: check the arch, the "
            "builtins' operand types and the -O level",
        )
    return found


def compile_kernel(
    kernel_dir: Path,
    *,
    out_dir: Path | None = None,
    require: Iterable[str] = (),
    function_pattern: str = "",
    missing_ok: bool = False,
) -> list[str]:
    """`kbuild rocm-compile`: compile a kernel's ROCm sources device-only (into
    `<kernel_dir>/.kbuild/rocm-device/` by default) and, with `require`, check each assembly with
    check_mfma; with a `function_pattern` too, the sources that define no such function are
    compiled but not checked, and at least one source must define one. Returns one report line
    per compiled source. missing_ok: a kernel without ROCm sources is reported and skipped
    instead of an error."""
    from kbuild.model.manifest import load_manifest

    manifest = load_manifest(kernel_dir)
    if missing_ok and not manifest.kernels_for(ROCM.name):
        return [f"{kernel_dir}: no ROCm kernels, skipped"]
    out_dir = Path(out_dir) if out_dir is not None else paths.real_dir(manifest.kernel_dir, ".kbuild/rocm-device")
    require = list(require)
    lines = []
    checked = 0
    for obj in compile_device_only(manifest, out_dir):
        line = f"{obj.kernel} {obj.arch} {obj.source.relative_to(manifest.kernel_dir)}: {obj.obj}"
        asm = obj.asm_text() if require else ""
        if require and function_pattern and not any(re.search(function_pattern, name) for name in asm_functions(asm)):
            lines.append(line + f"\n  no function matching {function_pattern!r}: not checked")
            continue
        if require:
            checked += 1
            found = check_mfma(asm, require, function_pattern=function_pattern, source=obj.asm)
            totals: Counter[str] = Counter()
            for counts in found.values():
                totals.update(counts)
            listed = ", ".join(f"{m} x{n}" for m, n in sorted(totals.items()))
            line += f"\n  {listed} in {len(found)} function(s)" + (
                f" matching {function_pattern!r}" if function_pattern else ""
            )
        lines.append(line)
    if require and function_pattern and checked == 0:
        raise KbuildError(
            f"no function matching {function_pattern!r} in any ROCm source of {manifest.name}",
            file=manifest.path,
            fix="check the function name (symbols are mangled: match a part of the name)",
        )
    return lines
