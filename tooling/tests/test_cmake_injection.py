"""CMake injection (issue 40): no string of a build.toml is ever read by CMake as code.

Every string-valued key that reaches the generated CMake project (the flags of every backend,
`src`, `include`, the kernel name, the kernel table names and the kernel folder's name) gets
each payload below, goes through `kbuild generate` and, when kbuild accepts it, through a real
CMake configure of the generated project (the step that runs CMake code). The sentinel file a
breakout would create never appears, and each case either exits 2 naming the key or configures
with the literal value (the flag, source or folder reaches the compile command as written).

It cannot pass by luck: the control test writes the same projects with a naive writer
(double quotes, no checks) and sees the sentinel appear through each key (two keys in the quick
set, all in the slow one), so every key's value does reach CMake's parser in this harness; and
the bracket writer is round-tripped through CMake. The slow set also builds each accepted case
alone with `kbuild build` (CPU) or configures it alone (CUDA, ROCm, XPU).
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbuild.build.builder import _require_tool, project_for
from kbuild.build.cmake_project import write_project
from kbuild.cli import main
from kbuild.model import cmakelang
from kbuild.model.manifest import Manifest, load_manifest
from kbuild.model.variants import Variant, find_torch

SENTINEL = "kbuildpwned"  # no `-`: the kernel name's `-` becomes `_` in CMake
TOUCH = f"execute_process(COMMAND touch {SENTINEL})"
# Each would run `touch kbuildpwned` if CMake read it as code (in and out of quotes, brackets
# of several lengths, generator expressions, variable references, list separators).
BREAKOUTS = [
    f"-O2)\n{TOUCH}\nmessage(STATUS x",
    f'x")\n{TOUCH}\nmessage(STATUS "x',
    f"-O2>)\n{TOUCH}\nmessage(STATUS $<1:x",
    f"x]])\n{TOUCH}\nmessage(STATUS [[x",
    f"x]=])\n{TOUCH}\nmessage(STATUS [=[x",
    f"x]==])\n{TOUCH}\nmessage(STATUS [==[x",
    f"-DA;-DB)\n{TOUCH}\nmessage(STATUS x",
    f"${{CMAKE_COMMAND}})\n{TOUCH}\nmessage(STATUS $ENV{{HOME}}",
    f"x\r)\r{TOUCH}\rmessage(STATUS x",
]
# CMake syntax on one line: each must be refused or reach the compiler as written.
LITERALS = [
    "$<1:-DGENEX>",
    "${CMAKE_COMMAND}",
    "$ENV{HOME}",
    "-DA;-DB",
    "-DX=a]==]b",
    "SHELL:-DA -DB",
    '-DQ="a)b"',
    "-DH=a#b(c)",
    "-DB=[==[x]==]",
    "-DG=a>b,c",
    "-DS=a b",
    f"-DT=`touch {SENTINEL}`",
    "-DE='x'",
]
PAYLOADS = BREAKOUTS + LITERALS

Capture = pytest.CaptureFixture[str]
CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"
ROCM = "torch213-cxx11-rocm71-x86_64-linux"
XPU = "torch213-cxx11-xpu20260-x86_64-linux"


def _toml(value: str) -> str:
    """`value` as a TOML basic string."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if ord(c) >= 32 and c != "\x7f" else f"\\u{ord(c):04x}" for c in escaped) + '"'


@dataclass
class Kernel:
    """A kernel with a table per backend; the fields are what a key's payloads replace."""

    folder: str = "demo"
    name: str = "demo"
    framework: str = "torch"
    binding_src: str = "torch-ext/torch_binding.cpp"
    binding_include: tuple[str, ...] = ()
    binding_flags: tuple[str, ...] = ()
    cpu_table: str = "demo_cpu"
    cpu_src: str = "demo_cpu/demo.cpp"
    cpu_include: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()

    def toml(self) -> str:
        def listed(values: tuple[str, ...]) -> str:
            return "[" + ", ".join(map(_toml, values)) + "]"

        return f"""[general]
name = {_toml(self.name)}
version = 1
edition = 5
license = "MIT"
backends = ["cpu", "cuda", "rocm", "xpu"]

[{self.framework}]
src = [{_toml(self.binding_src)}]
include = {listed(self.binding_include)}
cxx-flags = {listed(self.binding_flags)}

[kernel.{_toml(self.cpu_table)}]
backend = "cpu"
depends = ["torch"]
src = [{_toml(self.cpu_src)}]
include = {listed(self.cpu_include)}
cxx-flags = {listed(self.cpu_flags)}

[kernel.demo_cuda]
backend = "cuda"
depends = ["torch"]
src = ["demo_cuda/demo.cpp"]
cuda-capabilities = ["8.0"]
cuda-flags = {listed(self.cuda_flags)}

[kernel.demo_rocm]
backend = "rocm"
depends = ["torch"]
src = ["demo_rocm/demo.cpp"]
rocm-archs = ["gfx942"]
hip-flags = {listed(self.hip_flags)}

[kernel.demo_xpu]
backend = "xpu"
depends = ["torch"]
src = ["demo_xpu/demo.cpp"]
sycl-flags = {listed(self.sycl_flags)}
"""

    def write(self, parent: Path) -> Path:
        root = parent / self.folder
        sources = (self.binding_src, self.cpu_src, "demo_cuda/demo.cpp", "demo_rocm/demo.cpp", "demo_xpu/demo.cpp")
        for rel in sources:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("// placeholder\n")
        for folder in (*self.binding_include, *self.cpu_include):
            (root / folder).mkdir(parents=True, exist_ok=True)
        (root / "torch-ext" / "demo").mkdir(parents=True, exist_ok=True)
        (root / "torch-ext" / "demo" / "__init__.py").write_text("from ._ops import ops\n")
        (root / "build.toml").write_text(self.toml())
        return root


@dataclass(frozen=True)
class Key:
    """One string-valued key: how payloads are put in (flag lists take several at once), the
    variant that compiles it, the words an exit-2 message names it by, and (compiled file,
    argument) where the literal value shows in the compile commands (None: only refusal is right)."""

    label: str
    variant: str
    put: Callable[[list[str]], Kernel]
    named_by: tuple[str, ...]
    literal: Callable[[Path, str], tuple[str, str | None]] | None
    takes_several: bool = False


def _flag_key(label: str, variant: str, field: str, source: str) -> Key:
    table, name = label.split()
    framework = table.strip("[]") if table in ("[torch]", "[tvm-ffi]") else "torch"

    def put(payloads: list[str]) -> Kernel:
        return dataclasses.replace(Kernel(framework=framework), **{field: tuple(payloads)})

    return Key(label, variant, put, (table, name), lambda root, p: (str(root / source), p), takes_several=True)


def _only(payloads: list[str]) -> str:
    (payload,) = payloads
    return payload


KEYS = [
    _flag_key("[torch] cxx-flags", CPU, "binding_flags", "torch-ext/torch_binding.cpp"),
    _flag_key("[tvm-ffi] cxx-flags", CPU, "binding_flags", "torch-ext/torch_binding.cpp"),
    _flag_key("[kernel.demo_cpu] cxx-flags", CPU, "cpu_flags", "demo_cpu/demo.cpp"),
    _flag_key("[kernel.demo_cuda] cuda-flags", CUDA, "cuda_flags", "demo_cuda/demo.cpp"),
    _flag_key("[kernel.demo_rocm] hip-flags", ROCM, "hip_flags", "demo_rocm/demo.cpp"),
    _flag_key("[kernel.demo_xpu] sycl-flags", XPU, "sycl_flags", "demo_xpu/demo.cpp"),
    Key(
        "[torch] src",
        CPU,
        lambda ps: Kernel(binding_src=f"torch-ext/{_only(ps)}.cpp"),
        ("[torch]", "src"),
        lambda root, p: (str(root / f"torch-ext/{p}.cpp"), None),
    ),
    Key(
        "[kernel.demo_cpu] src",
        CPU,
        lambda ps: Kernel(cpu_src=f"demo_cpu/{_only(ps)}.cpp"),
        ("[kernel.demo_cpu]", "src"),
        lambda root, p: (str(root / f"demo_cpu/{p}.cpp"), None),
    ),
    Key(
        "[torch] include",
        CPU,
        lambda ps: Kernel(binding_include=tuple(ps)),
        ("[torch]", "include"),
        lambda root, p: (str(root / "torch-ext/torch_binding.cpp"), f"-I{root / p}"),
        takes_several=True,
    ),
    Key(
        "[kernel.demo_cpu] include",
        CPU,
        lambda ps: Kernel(cpu_include=tuple(ps)),
        ("[kernel.demo_cpu]", "include"),
        lambda root, p: (str(root / "demo_cpu/demo.cpp"), f"-I{root / p}"),
        takes_several=True,
    ),
    Key("[general] name", CPU, lambda ps: Kernel(name=_only(ps)), ("[general]", "name"), None),
    Key("[kernel.<name>]", CPU, lambda ps: Kernel(cpu_table=_only(ps)), ("[kernel",), None),
    Key(
        "kernel folder",
        CPU,
        lambda ps: Kernel(folder=_only(ps)),
        ("kernel folder",),
        lambda root, p: (str(root / "demo_cpu/demo.cpp"), None),
    ),
]


def _without_toolkits(variant: str) -> list[tuple[str, str]]:
    """Test-side edits that let CMake configure a CUDA or ROCm project without their toolkits:
    the device language is left out and its compile options apply to the C++ sources instead,
    so that they show in the compile commands. No payload can be in these texts."""
    language = {CUDA: "CUDA", ROCM: "HIP"}.get(variant)
    if language is None:
        return []
    edits = [(f" {cmakelang.argument(language)})", ")"), (f"COMPILE_LANGUAGE:{language}>", "COMPILE_LANGUAGE:CXX>")]
    if language == "CUDA":
        edits += [("find_package(CUDAToolkit REQUIRED)", ""), (" CUDA::cudart", "")]
    return edits


def _sentinels(root: Path) -> list[Path]:
    return list(root.rglob(SENTINEL + "*"))


def _configure(build_dir: Path, variant: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """CMake configure and generate of a project kbuild wrote, as `kbuild build` runs it (plus the
    compile commands, to read what each compiler would be given)."""
    cmake_file = build_dir / "CMakeLists.txt"
    text = cmake_file.read_text()
    for old, new in _without_toolkits(variant):
        assert old in text, f"the generated project changed: update _without_toolkits ({old!r})"
        text = text.replace(old, new)
    cmake_file.write_text(text)
    args = [_require_tool("cmake", ""), "-G", "Ninja", "-S", str(build_dir), "-B", str(build_dir)]
    args += [f"-DCMAKE_MAKE_PROGRAM={_require_tool('ninja', '')}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, timeout=120)


def _compile_commands(build_dir: Path) -> dict[str, list[str]]:
    """Each compiled file's arguments, as the shell that Ninja runs the command in reads them
    (a command that the shell would run code from creates the sentinel here)."""
    commands = {}
    for entry in json.loads((build_dir / "compile_commands.json").read_text()):
        printed = subprocess.run(
            ["sh", "-c", "printf '%s\\0' " + entry["command"]], cwd=build_dir, capture_output=True, check=True
        )
        commands[entry["file"]] = printed.stdout.decode().split("\0")[:-1]
    return commands


def _generate(key: Key, payloads: list[str], case_dir: Path, capsys: Capture) -> tuple[int, str, Path]:
    """`kbuild generate` of a kernel with `payloads` in `key`: exit code, stderr, kernel folder."""
    case_dir.mkdir(parents=True)
    root = key.put(payloads).write(case_dir)
    code = main(["generate", str(root), "--variant", key.variant])
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err
    assert code in (0, 2), err
    if code == 2:
        assert str(root / "build.toml") in err, f"{key.label} {payloads!r}: the error names build.toml\n{err}"
        for word in key.named_by:
            assert word in err, f"{key.label} {payloads!r}: the error names {word}\n{err}"
    else:
        assert key.literal is not None, f"{key.label} accepted {payloads!r}, which no valid name holds"
    return code, err, root


def _check_literals(key: Key, payloads: list[str], root: Path, build_dir: Path) -> None:
    """Each payload reaches its compile command as written."""
    assert key.literal is not None
    commands = _compile_commands(build_dir)
    for payload in payloads:
        source, argument = key.literal(root, payload)
        assert source in commands, f"{key.label} {payload!r}: {source} is not compiled ({list(commands)})"
        if argument is not None:
            assert argument in commands[source], f"{key.label}: {argument!r} not in {commands[source]}"


def _configured(key: Key, payloads: list[str], case_dir: Path, capsys: Capture) -> None:
    code, err, root = _generate(key, payloads, case_dir, capsys)
    assert code == 0, err
    build_dir = root / ".kbuild" / key.variant
    result = _configure(build_dir, key.variant, case_dir)
    assert not _sentinels(case_dir), f"{key.label} {payloads!r}: CMake code ran"
    assert result.returncode == 0, f"{key.label} {payloads!r}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    _check_literals(key, payloads, root, build_dir)


def test_no_payload_in_any_key_runs_cmake_code(tmp_path, capsys):
    """Every key x payload through `kbuild generate`; what kbuild accepts is configured by CMake
    (a key's accepted flags or folders together, each checked in the compile commands)."""
    refused = configured = keys_configured = 0
    for k, key in enumerate(KEYS):
        accepted = []
        for p, payload in enumerate(PAYLOADS):
            code, _, _ = _generate(key, [payload], tmp_path / f"k{k}-p{p}", capsys)
            if code == 2:
                refused += 1
            else:
                accepted.append(payload)
        groups = [accepted] if key.takes_several and accepted else [[p] for p in accepted]
        for g, group in enumerate(groups):
            _configured(key, group, tmp_path / f"k{k}-accepted{g}", capsys)
        configured += len(accepted)
        keys_configured += bool(accepted)
        assert not _sentinels(tmp_path), f"{key.label}: CMake code ran"
    tried = len(KEYS) * len(PAYLOADS)
    assert refused + configured == tried
    with capsys.disabled():
        print(
            f"\nCMake injection: {len(KEYS)} keys x {len(PAYLOADS)} payloads = {tried} tried, 0 executed "
            f"({refused} refused with exit 2 naming the key, {configured} configured with the literal value)"
        )
    assert configured >= len(KEYS) - 2, "most keys take some literal payload (a blanket refusal would pass too)"
    assert keys_configured >= len(KEYS) - 2, "most keys take some literal payload (a blanket refusal would pass too)"


@pytest.mark.slow
def test_each_accepted_payload_builds_alone_with_the_literal_value(tmp_path, capsys, monkeypatch):
    """Each accepted key x payload on its own: configured by CMake, and built in full by
    `kbuild build` where this machine can (the CPU variant): no CMake code and no shell code
    (backticks reach the compiler as text) runs."""
    monkeypatch.setenv("CMAKE_EXPORT_COMPILE_COMMANDS", "ON")
    for k, key in enumerate(KEYS):
        for p, payload in enumerate(PAYLOADS):
            case_dir = tmp_path / f"k{k}-p{p}"
            code, _, root = _generate(key, [payload], case_dir, capsys)
            if code == 2:
                continue
            if key.variant != CPU:
                _configured(key, [payload], tmp_path / f"k{k}-p{p}-configure", capsys)
                continue
            code = main(["build", str(root)])
            assert not _sentinels(tmp_path), f"{key.label} {payload!r}: code ran"
            assert code == 0, capsys.readouterr().err
            _check_literals(key, [payload], root, root / ".kbuild" / CPU)
            assert (root / "build" / CPU / "metadata.json").is_file()


QUICK_CONTROL = ("[kernel.demo_cpu] cxx-flags", "kernel folder")


def _naive_argument(text: str) -> cmakelang.Argument:
    return cmakelang.Argument(f'"{text}"')


@pytest.mark.parametrize(
    "key",
    [pytest.param(key, id=key.label, marks=[] if key.label in QUICK_CONTROL else [pytest.mark.slow]) for key in KEYS],
)
def test_control_a_naive_writer_runs_the_payload_of_each_key(key, tmp_path, monkeypatch):
    """With double quotes and no checks in place of kbuild.model.cmakelang, the quote breakout creates
    the sentinel through the key: the harness sees an injection wherever one can happen
    (two keys in the quick set, every key in the slow one)."""
    monkeypatch.setattr(cmakelang, "_bracket", _naive_argument)
    monkeypatch.setattr(cmakelang, "problem", lambda value: None)
    root = key.put(["placeholder"]).write(tmp_path)
    manifest = _inject(load_manifest(root), key, BREAKOUTS[1], root, tmp_path)
    project = project_for(manifest, Variant.parse(key.variant))
    write_project(project, find_torch())
    _configure(project.build_dir, key.variant, tmp_path)
    assert _sentinels(tmp_path), f"{key.label}: the naive writer's project did not run the payload"


def _inject(manifest: Manifest, key: Key, payload: str, root: Path, case_dir: Path) -> Manifest:
    """`manifest` with `payload` where `key` holds its value (files and folders made for it),
    past the validation: the control tests the writer, not the rules."""
    replace = dataclasses.replace
    kernels = dict(manifest.kernels)
    label = key.label
    if label.endswith("flags"):
        field = {"cxx-flags": "cxx_flags", "cuda-flags": "cuda_flags", "hip-flags": "hip_flags"}
        field["sycl-flags"] = "sycl_flags"
        name = label.split()[-1]
        if label.startswith(("[torch]", "[tvm-ffi]")):
            assert manifest.torch is not None
            return replace(manifest, torch=replace(manifest.torch, cxx_flags=[payload]))
        table = label[len("[kernel.") : label.index("]")]
        kernels[table] = replace(kernels[table], **{field[name]: [payload]})
        return replace(manifest, kernels=kernels)
    if label.endswith(("src", "include")):
        folder = "torch-ext" if label.startswith("[torch]") else "demo_cpu"
        rel = f"{folder}/{payload}.cpp" if label.endswith("src") else payload
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if label.endswith("src"):
            (root / rel).write_text("// placeholder\n")
        else:
            (root / rel).mkdir(exist_ok=True)
        field_name = "src" if label.endswith("src") else "include"
        if label.startswith("[torch]"):
            assert manifest.torch is not None
            return replace(manifest, torch=replace(manifest.torch, **{field_name: [rel]}))
        kernels["demo_cpu"] = replace(kernels["demo_cpu"], **{field_name: [rel]})
        return replace(manifest, kernels=kernels)
    if label == "[general] name":
        return replace(manifest, general=replace(manifest.general, name=payload))
    if label == "[kernel.<name>]":
        kernels = {k: (replace(v, name=payload) if k == "placeholder" else v) for k, v in kernels.items()}
        return replace(manifest, kernels=kernels)
    moved = case_dir / payload
    root.rename(moved)
    return replace(manifest, path=moved / "build.toml")


def test_the_bracket_writer_round_trips_through_cmake(tmp_path):
    """Values with every kind of bracket closer read back byte for byte (cmake -P)."""
    rng = random.Random(40)
    alphabet = ']=[ )("#$;\\<>{}a'
    values = ["]]", "]=]", "]==]", "a]", "a]=", "a]==", "]=", "[[x]]", "[=[x]=]", "x]===]y", ""]
    values += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(300)]
    lines = [f"file(WRITE {tmp_path.as_posix()}/v{i} {cmakelang._bracket(v)})" for i, v in enumerate(values)]
    (tmp_path / "script.cmake").write_text("\n".join(lines) + "\n")
    subprocess.run([_require_tool("cmake", ""), "-P", str(tmp_path / "script.cmake")], check=True, timeout=60)
    for i, value in enumerate(values):
        assert (tmp_path / f"v{i}").read_text() == value, value


def test_the_template_takes_no_value_that_skipped_the_writer():
    with pytest.raises(TypeError, match="not written by kbuild.model.cmakelang"):
        cmakelang.only_arguments("-O2)\nexecute_process(COMMAND touch x)")
    assert cmakelang.only_arguments(cmakelang.argument("-O2")) == "[[-O2]]"
