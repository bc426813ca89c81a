"""kbuild reads build.toml as the `kernels` library's own parser does: same accept/reject decision.

`kernels` (the PyPI loader, a test extra) carries kernel-builder's manifest parser as
`kernels._rust.Build.open`. Each case below is a manifest written for this test; both parsers
read it. Where kbuild decides differently on purpose, the case is listed in STRICTER_CASES
(kbuild rejects what kernel-builder accepts; its message says so) or KBUILD_READS (edition 2
files, which kernel-builder no longer reads, and file:// URLs), each with the reason.
"""

import warnings
from pathlib import Path

import pytest
from manifest_fuzz import DATA, kernel_folder

from kbuild.core.errors import KbuildError
from kbuild.model.manifest import STRICTER, load_manifest

kernels_rust = pytest.importorskip("kernels._rust")

BASE = """\
[general]
name = "parity"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "rocm"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.parity_cpu]
backend = "cpu"
depends = ["torch"]
src = ["parity_cpu/op.cpp"]

[kernel.parity_cuda]
backend = "cuda"
depends = ["torch"]
src = ["parity_cuda/op.cu"]

[kernel.parity_rocm]
backend = "rocm"
depends = ["torch"]
src = ["parity_rocm/op.hip"]
"""
GENERAL_END = 'backends = ["cpu", "cuda", "rocm"]\n'
TORCH_END = 'src = ["torch-ext/torch_binding.cpp"]\n'
CPU_END = 'src = ["parity_cpu/op.cpp"]\n'
CUDA_END = 'src = ["parity_cuda/op.cu"]\n'
ROCM_END = 'src = ["parity_rocm/op.hip"]\n'
NOARCH = BASE[: BASE.index("[torch]")] + "[torch-noarch]\n"


def add(after: str, text: str) -> str:
    return BASE.replace(after, after + text + "\n")


def swap(old: str, new: str, base: str = BASE) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def general(text: str) -> str:
    return add(GENERAL_END, text)


# Manifests both parsers accept.
VALID = {
    "base": BASE,
    "general.neuron python-depends": general('[general.neuron]\npython-depends = ["nki"]'),
    "general.neuron kernel-depends": general('[general.neuron]\nkernel-depends = [{ repo-id = "a/b", version = 1 }]'),
    "general.tpu python-depends": general('[general.tpu]\npython-depends = ["einops"]'),
    "general.xpu both keys": general('[general.xpu]\npython-depends = ["onednn"]\nkernel-depends = []'),
    "general.xpu general dependency": general('[general.xpu]\npython-depends = ["einops"]'),
    "general.cuda every key": general(
        '[general.cuda]\nminver = "12.6"\nmaxver = "13.0"\npython-depends = ["nvidia-cutlass-dsl"]\n'
        'kernel-depends = [{ repo-id = "a/b", revision = "abc" }]'
    ),
    "general.hub": general('[general.hub]\nrepo-id = "org/parity"\nbranch = "main"'),
    "empty general.hub": general("[general.hub]"),
    "upstream https": swap(GENERAL_END, GENERAL_END + 'upstream = "https://github.com/a/b"\n'),
    "upstream scp-like": swap(GENERAL_END, GENERAL_END + 'upstream = "git@github.com:a/b.git"\n'),
    "source ssh": swap(GENERAL_END, GENERAL_END + 'source = "ssh://git@example.com/a/b"\n'),
    "python-depends": swap(GENERAL_END, GENERAL_END + 'python-depends = ["einops", "helion", "tvm-ffi"]\n'),
    "kernel-depends by version": swap(
        GENERAL_END, GENERAL_END + 'kernel-depends = [{ repo-id = "a/b", version = 0 }]\n'
    ),
    "version 0": swap("version = 1", "version = 0"),
    "largest version": swap("version = 1", "version = 9223372036854775807"),
    "empty license": swap('"Apache-2.0"', '""'),
    "experimental backends": swap(GENERAL_END, 'backends = ["cpu", "cuda", "rocm", "cann", "neuron", "tpu"]\n', NOARCH),
    "torch every key": add(
        TORCH_END, 'include = ["inc"]\npyext = ["py", "json"]\nminver = "2.10"\nmaxver = "2.13"\ncxx-flags = ["-O3"]'
    ),
    "stable-abi version": add(TORCH_END, 'stable-abi = "2.10"'),
    "stable-abi per backend": add(TORCH_END, '[torch.stable-abi]\ncuda = "2.10"\ncpu = "2.11"\nneuron = "2.12"'),
    "torch without src": swap(TORCH_END, ""),
    "tvm-ffi every key": swap(
        "[torch]\n" + TORCH_END, '[tvm-ffi]\nsrc = []\ninclude = ["inc"]\npyext = ["py"]\ncxx-flags = ["-O2"]\n'
    ),
    "torch-noarch every key": NOARCH + 'pyext = ["py"]\ncuda_capabilities = ["8.0"]\nrocm_archs = ["gfx942"]\n',
    "torch-noarch empty": NOARCH,
    "cpu kernel every key": add(CPU_END, 'include = ["inc"]\ncxx-flags = ["-O3"]'),
    "cuda kernel every key": add(
        CUDA_END,
        'include = ["inc"]\ncxx-flags = []\ncuda-capabilities = ["7.5", "9.0a", "10.0f", "12.0+PTX"]\n'
        'cuda-flags = ["-lineinfo"]\ncuda-minver = "12.8"',
    ),
    "rocm kernel every key": add(ROCM_END, 'rocm-archs = ["gfx942", "gfx90a"]\nhip-flags = ["-O3"]'),
    "xpu kernel every key": swap(GENERAL_END, 'backends = ["cpu", "cuda", "rocm", "xpu"]\n')
    + '\n[kernel.parity_xpu]\nbackend = "xpu"\ndepends = ["torch", "sycl_tla"]\nsrc = ["parity_xpu/op.cpp"]\n'
    'sycl-flags = ["-fsycl"]\n',
    "metal kernel": swap(GENERAL_END, 'backends = ["cpu", "cuda", "rocm", "metal"]\n')
    + '\n[kernel.parity_metal]\nbackend = "metal"\ndepends = ["metal-cpp"]\nsrc = ["parity_metal/op.mm"]\n',
    "every cutlass version kernel-builder knows": swap(
        'depends = ["torch"]\nsrc = ["parity_cuda',
        'depends = ["cutlass_2_10", "cutlass_3_5", "cutlass_3_6", "cutlass_3_8", "cutlass_3_9", "cutlass_4_0", '
        '"cutlass_4_4", "cutlass_4_5"]\nsrc = ["parity_cuda',
    ),
    "empty depends": swap('depends = ["torch"]', "depends = []"),
    "edition 4": swap("edition = 5\n", ""),
    "edition 4 with general.neuron": swap("edition = 5\n", "") + '\n[general.neuron]\npython-depends = ["nki"]\n',
    "inline tables and dotted keys": (
        'general = { name = "parity", version = 1, edition = 5, license = "MIT", backends = ["cpu"] }\n'
        'torch.src = ["torch-ext/torch_binding.cpp"]\n'
        'kernel.parity_cpu = { backend = "cpu", depends = ["torch"], src = ["parity_cpu/op.cpp"] }\n'
    ),
    "CRLF line ends": BASE.replace("\n", "\r\n"),
}
VALID.update({f"corpus {path.name}": path.read_text() for path in sorted(DATA.glob("e[45]-*.toml"))})

# Manifests both parsers reject.
INVALID = {
    "empty file": "",
    "TOML syntax": swap('license = "Apache-2.0"', 'license = "Apache-2.0'),
    "duplicate key": swap("version = 1", "version = 1\nversion = 2"),
    "general is a list": "general = []\n" + BASE[BASE.index("[torch]") :],
    "general is an array of tables": swap("[general]", "[[general]]"),
    "integer beyond 64 bits": swap("version = 1", "version = 18446744073709551616"),
    "unknown table": BASE + "\n[foo]\nx = 1\n",
    "unknown key in general": general("foo = 1"),
    "universal in an edition 5 file": general("universal = false"),
    "unknown general sub-table cann": general("[general.cann]\npython-depends = []"),
    "unknown general sub-table rocm": general("[general.rocm]\npython-depends = []"),
    "unknown key in general.hub": general("[general.hub]\nrepo = 'a/b'"),
    "unknown key in general.cuda": general("[general.cuda]\nversion = '12.6'"),
    "unknown key in general.neuron": general("[general.neuron]\nx = 1"),
    "kernel-depends in general.tpu": general("[general.tpu]\nkernel-depends = []"),
    "unknown key in torch": add(TORCH_END, "sources = []"),
    "minver in tvm-ffi": swap("[torch]\n" + TORCH_END, '[tvm-ffi]\nminver = "2.10"\n'),
    "stable-abi in tvm-ffi": swap("[torch]\n" + TORCH_END, '[tvm-ffi]\nstable-abi = "2.10"\n'),
    "kebab-case key in torch-noarch": NOARCH + 'cuda-capabilities = ["8.0"]\n',
    "src in torch-noarch": NOARCH + 'src = ["a.py"]\n',
    "typo in a kernel key": add(CUDA_END, 'cuda-capabilites = ["8.0"]'),
    "cuda key on a cpu kernel": add(CPU_END, 'cuda-capabilities = ["8.0"]'),
    "rocm key on a cuda kernel": add(CUDA_END, 'rocm-archs = ["gfx942"]'),
    "hip-flags on a cpu kernel": add(CPU_END, 'hip-flags = ["-O3"]'),
    "sycl-flags on a cuda kernel": add(CUDA_END, 'sycl-flags = ["-O3"]'),
    "cuda-minver on a rocm kernel": add(ROCM_END, 'cuda-minver = "12.8"'),
    "missing name": swap('name = "parity"\n', ""),
    "missing version": swap("version = 1\n", ""),
    "missing license": swap('license = "Apache-2.0"\n', ""),
    "missing backends": swap(GENERAL_END, ""),
    "missing kernel backend": swap('backend = "cpu"\n', ""),
    "missing kernel depends": swap('depends = ["torch"]\nsrc = ["parity_cpu', 'src = ["parity_cpu'),
    "missing kernel src": swap(CPU_END, ""),
    "no framework table": swap("[torch]\n" + TORCH_END, ""),
    "two framework tables": BASE + "\n[torch-noarch]\n",
    "version as a string": swap("version = 1", 'version = "1"'),
    "version as a float": swap("version = 1", "version = 1.0"),
    "negative version": swap("version = 1", "version = -1"),
    "edition as a string": swap("edition = 5", 'edition = "5"'),
    "edition as a boolean": swap("edition = 5", "edition = true"),
    "edition 2 written out": swap("edition = 5", "edition = 2"),
    "edition 4 written out": swap("edition = 5", "edition = 4"),
    "edition 6": swap("edition = 5", "edition = 6"),
    "name as an integer": swap('name = "parity"', "name = 1"),
    "upper-case name": swap('name = "parity"', 'name = "Parity"'),
    "underscore in name": swap('name = "parity"', 'name = "par_ity"'),
    "one-letter name": swap('name = "parity"', 'name = "p"'),
    "name ends with a dash": swap('name = "parity"', 'name = "parity-"'),
    "license as an integer": swap('"Apache-2.0"', "1"),
    "backends as a string": swap(GENERAL_END, 'backends = "cpu"\n'),
    "unknown backend": swap(GENERAL_END, 'backends = ["cpu", "cdua"]\n'),
    "unknown kernel backend": swap('backend = "cuda"', 'backend = "cdua"'),
    "neuron kernel": swap('backend = "cuda"', 'backend = "neuron"'),
    "kernel backend as a list": swap('backend = "cpu"', 'backend = ["cpu"]'),
    "kernel backend as a list, edition 4": swap('backend = "cpu"', 'backend = ["cpu"]', swap("edition = 5\n", "")),
    "kernel backend as an integer, edition 4": swap('backend = "cpu"', "backend = 1", swap("edition = 5\n", "")),
    "src as a string": swap(CPU_END, 'src = "parity_cpu/op.cpp"\n'),
    "pyext as a string": add(TORCH_END, 'pyext = "py"'),
    "kernel table is a value": BASE + "\n[kernel]\nextra = 1\n",
    "unknown dependency": swap('depends = ["torch"]', 'depends = ["cutlass_9_9"]'),
    "cutlass 4.1": swap('depends = ["torch"]', 'depends = ["cutlass_4_1"]'),
    "kernel-depends as a table": general("[general.kernel-depends]\nrepo-id = 'a/b'\nversion = 1"),
    "kernel-depends of strings": swap(GENERAL_END, GENERAL_END + 'kernel-depends = ["a/b"]\n'),
    "kernel dependency version and revision": swap(
        GENERAL_END, GENERAL_END + 'kernel-depends = [{ repo-id = "a/b", version = 1, revision = "x" }]\n'
    ),
    "kernel dependency without version or revision": swap(
        GENERAL_END, GENERAL_END + 'kernel-depends = [{ repo-id = "a/b" }]\n'
    ),
    "kernel dependency without repo-id": swap(GENERAL_END, GENERAL_END + "kernel-depends = [{ version = 1 }]\n"),
    "kernel dependency with a string version": swap(
        GENERAL_END, GENERAL_END + 'kernel-depends = [{ repo-id = "a/b", version = "1" }]\n'
    ),
    "kernel dependency with an unknown key": swap(
        GENERAL_END, GENERAL_END + 'kernel-depends = [{ repo-id = "a/b", version = 1, tag = "x" }]\n'
    ),
    "hub branch as an integer": general("[general.hub]\nbranch = 1"),
    "upstream as an integer": swap(GENERAL_END, GENERAL_END + "upstream = 1\n"),
    "empty upstream": swap(GENERAL_END, GENERAL_END + 'upstream = ""\n'),
    "upstream without a scheme": swap(GENERAL_END, GENERAL_END + 'upstream = "github.com/a/b"\n'),
    "upstream as a local path": swap(GENERAL_END, GENERAL_END + 'source = "/srv/git/a"\n'),
    "upstream with only a scheme": swap(GENERAL_END, GENERAL_END + 'upstream = "https://"\n'),
    "torch minver with one part": add(TORCH_END, 'minver = "2"'),
    "torch maxver with three parts": add(TORCH_END, 'maxver = "2.10.0"'),
    "torch minver not a number": add(TORCH_END, 'minver = "2.a"'),
    "empty torch minver": add(TORCH_END, 'minver = ""'),
    "general.cuda minver with one part": general('[general.cuda]\nminver = "12"'),
    "general.cuda maxver with three parts": general('[general.cuda]\nmaxver = "12.6.1"'),
    "kernel cuda-minver not a number": add(CUDA_END, 'cuda-minver = "v12.8"'),
    "stable-abi with one part": add(TORCH_END, 'stable-abi = "2"'),
    "stable-abi with three parts": add(TORCH_END, 'stable-abi = "2.10.1"'),
    "stable-abi as an integer": add(TORCH_END, "stable-abi = 210"),
    "stable-abi for an unknown backend": add(TORCH_END, '[torch.stable-abi]\ncdua = "2.10"'),
    "edition 4 without version": swap("version = 1\n", "", swap("edition = 5\n", "")),
    "edition 4 without license": swap('license = "Apache-2.0"\n', "", swap("edition = 5\n", "")),
    "edition 4 without backends": swap(GENERAL_END, "", swap("edition = 5\n", "")),
}

# kernel-builder accepts these; kbuild refuses them, on purpose, for the reason given.
STRICTER_CASES = {
    "unknown Python dependency": (
        swap(GENERAL_END, GENERAL_END + 'python-depends = ["numpy"]\n'),
        "the `kernels` loader refuses a build with an unknown dependency when it loads it",
    ),
    "unknown CUDA Python dependency": (
        general('[general.cuda]\npython-depends = ["cupy"]'),
        "the same, for a backend's dependencies",
    ),
    "unknown CUDA capability": (add(CUDA_END, 'cuda-capabilities = ["sm90"]'), "nvcc refuses it at build time"),
    "pyext of a binary": (
        add(TORCH_END, 'pyext = ["py", "so"]'),
        "a prebuilt library in torch-ext would be staged as if built from the sources",
    ),
    "CUDA capability without a minor": (add(CUDA_END, 'cuda-capabilities = ["8"]'), "nvcc refuses it"),
    "unknown ROCm arch": (add(ROCM_END, 'rocm-archs = ["mi300"]'), "the ROCm compiler refuses it at build time"),
    "300-character name": (
        swap('name = "parity"', 'name = "' + "p" * 300 + '"'),
        "the Hub refuses repository names over 96 characters; build folders and op names are made from it",
    ),
    "kernel table name with a slash": (
        swap("[kernel.parity_cpu]", '[kernel."parity/../cpu"]'),
        "kernel table names become folder and CMake target names",
    ),
    "empty backends": (swap(GENERAL_END, "backends = []\n", NOARCH), "a kernel for no backend is a mistake"),
    "backend without a kernel table": (
        swap(GENERAL_END, 'backends = ["cpu", "cuda", "rocm", "xpu"]\n'),
        "a compiled kernel needs sources for every backend it claims",
    ),
    "kernel table for an unlisted backend": (
        swap(GENERAL_END, 'backends = ["cpu", "cuda"]\n'),
        "kernel-builder would skip the table silently",
    ),
    "absolute source path": (swap(CPU_END, 'src = ["/etc/passwd"]\n'), "a build reads only its kernel folder"),
    "source path outside the kernel": (swap(CPU_END, 'src = ["../other/op.cpp"]\n'), "the same"),
    "missing source file": (swap(CPU_END, 'src = ["parity_cpu/missing.cpp"]\n'), "found at check time, not build time"),
}

# kernel-builder rejects these; kbuild reads them, on purpose, for the reason given.
KBUILD_READS = {
    f"corpus {path.name}": (path.read_text(), "kbuild still reads edition 2 (the 2025 format), with an upgrade warning")
    for path in sorted(DATA.glob("e2-*.toml"))
}
KBUILD_READS["upstream with the file scheme"] = (
    swap(GENERAL_END, GENERAL_END + 'source = "file:///srv/git/a"\n'),
    "local mirrors, and the upstream repositories that sync's tests make, are file:// URLs",
)


def decisions(text: str, root: Path) -> tuple[KbuildError | None, Exception | None]:
    """kbuild's error (None: accepted) and kernel-builder's (None: accepted) for one manifest."""
    source = root / "source.toml"
    source.write_text(text.replace("parity_cpu/missing.cpp", "parity_cpu/op.cpp"), encoding="utf-8")
    try:
        folder = kernel_folder(source, root / "kernels")
    except Exception:  # a manifest tomllib cannot read: no sources to create
        folder = root / "kernels" / "raw"
        folder.mkdir(parents=True)
    (folder / "build.toml").write_text(text, encoding="utf-8", newline="")
    kbuild_error = kernels_error = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_manifest(folder)
    except KbuildError as exc:
        kbuild_error = exc
    try:
        kernels_rust.Build.open(folder)
    except ValueError as exc:
        kernels_error = exc
    return kbuild_error, kernels_error


@pytest.mark.parametrize("case", VALID)
def test_both_accept(case, tmp_path):
    kbuild_error, kernels_error = decisions(VALID[case], tmp_path)
    assert kernels_error is None, f"test case: kernel-builder rejects it: {kernels_error}"
    assert kbuild_error is None, str(kbuild_error)


@pytest.mark.parametrize("case", INVALID)
def test_both_reject(case, tmp_path):
    kbuild_error, kernels_error = decisions(INVALID[case], tmp_path)
    assert kernels_error is not None, "test case: kernel-builder accepts it"
    assert kbuild_error is not None, f"kbuild accepts what kernel-builder rejects: {kernels_error}"
    assert STRICTER not in kbuild_error.message


@pytest.mark.parametrize("case", STRICTER_CASES)
def test_kbuild_is_stricter_on_purpose_and_says_so(case, tmp_path):
    text, _reason = STRICTER_CASES[case]
    kbuild_error, kernels_error = decisions(text, tmp_path)
    assert kernels_error is None, f"kernel-builder rejects it too, the case is no difference: {kernels_error}"
    assert kbuild_error is not None and STRICTER in kbuild_error.message, str(kbuild_error)


@pytest.mark.parametrize("case", KBUILD_READS)
def test_kbuild_reads_on_purpose_what_kernel_builder_does_not(case, tmp_path):
    text, _reason = KBUILD_READS[case]
    kbuild_error, kernels_error = decisions(text, tmp_path)
    assert kernels_error is not None, "kernel-builder reads it too, the case is no difference"
    assert kbuild_error is None, str(kbuild_error)
