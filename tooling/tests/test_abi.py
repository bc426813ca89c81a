"""kbuild.build.abi on small shared libraries compiled here: each rule fires on a bad import and
stays quiet otherwise."""

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from kbuild.build.abi import LIMITED_API_FILE, check_abi, limited_api_symbols
from kbuild.core.errors import KbuildError

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile test libraries")

# A stand-in for libstdc++/glibc: exports one symbol per version node, so a library linked
# against it imports e.g. `new_sym@GLIBCXX_3.4.30` whatever the toolchain of this machine is.
FAKE_SYSTEM_LIB = """
extern "C" int old_sym(void) { return 1; }
extern "C" int new_sym(void) { return 2; }
extern "C" int newer_glibc(void) { return 3; }
"""
FAKE_VERSION_SCRIPT = """
GLIBCXX_3.4.24 { global: old_sym; };
GLIBCXX_3.4.30 { global: new_sym; };
GLIBC_2.34 { global: newer_glibc; };
"""

EXTENSION = """
extern "C" int old_sym(void);
extern "C" int new_sym(void);
extern "C" int newer_glibc(void);
extern "C" void* PyLong_FromLong(long);
extern "C" void* PyModule_Create2(void*, int);
extern "C" void _PyObject_GetDictPtr(void*);
namespace c10 { void warn_once(int); }
namespace at { void empty(int); }
namespace torch { namespace stable { void from_blob(int); } }
extern "C" int use(int which) {
#ifdef USE_NEW_VERSION
  new_sym(); newer_glibc();
#endif
#ifdef USE_PRIVATE_PYTHON
  _PyObject_GetDictPtr(0);
#endif
#ifdef USE_ATEN
  c10::warn_once(1); at::empty(2);
#endif
  torch::stable::from_blob(3);
  PyModule_Create2(0, 3);
  PyLong_FromLong(which);
  return old_sym();
}
"""


def _compile(tmp_path: Path, out: Path, *defines: str) -> Path:
    system = tmp_path / "libfakesys.so"
    if not system.exists():
        (tmp_path / "sys.cpp").write_text(FAKE_SYSTEM_LIB)
        (tmp_path / "sys.map").write_text(FAKE_VERSION_SCRIPT)
        subprocess.run(
            [
                "g++",
                "-shared",
                "-fPIC",
                "-Wl,--version-script",
                str(tmp_path / "sys.map"),
                str(tmp_path / "sys.cpp"),
                "-o",
                str(system),
            ],
            check=True,
        )
    (tmp_path / "ext.cpp").write_text(EXTENSION)
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = [f"-D{d}" for d in defines]
    subprocess.run(
        [
            "g++",
            "-shared",
            "-fPIC",
            *flags,
            str(tmp_path / "ext.cpp"),
            "-L",
            str(tmp_path),
            "-lfakesys",
            "-o",
            str(out),
        ],
        check=True,
    )
    return out


def _messages(build: Path) -> list[str]:
    return [f.message for f in check_abi(build)]


def test_clean_library_has_no_findings(tmp_path):
    _compile(tmp_path, tmp_path / "build/torch-stable-abi213-cpu-x86_64-linux/_x.abi3.so")
    assert _messages(tmp_path / "build") == []


def test_symbol_versions_beyond_manylinux_2_28(tmp_path):
    _compile(tmp_path, tmp_path / "build/torch213-cxx11-cpu-x86_64-linux/_x.abi3.so", "USE_NEW_VERSION")
    messages = _messages(tmp_path / "build")
    assert len(messages) == 2
    assert messages[0].startswith("needs GLIBCXX_3.4.30 (new_sym)") and "at most GLIBCXX_3.4.24" in messages[0]
    assert messages[1].startswith("needs GLIBC_2.34 (newer_glibc)") and "at most GLIBC_2.28" in messages[1]


def test_python_symbols_outside_limited_api(tmp_path):
    _compile(
        tmp_path,
        tmp_path / "build/torch213-cxx11-cpu-x86_64-linux/_x.abi3.so",
        "USE_PRIVATE_PYTHON",
    )
    (message,) = _messages(tmp_path / "build")
    assert "outside the limited API 3.9 (_PyObject_GetDictPtr)" in message


def test_torch_cxx_symbols_only_matter_for_stable_abi_variants(tmp_path):
    _compile(tmp_path, tmp_path / "build/torch-stable-abi213-cpu-x86_64-linux/_x.abi3.so", "USE_ATEN")
    _compile(tmp_path, tmp_path / "build/torch213-cxx11-cpu-x86_64-linux/_x.abi3.so", "USE_ATEN")
    findings = check_abi(tmp_path / "build")
    assert [f.path.parent.name for f in findings] == ["torch-stable-abi213-cpu-x86_64-linux"]
    assert "(at::empty(int), c10::warn_once(int))" in findings[0].message
    assert "torch::stable" not in findings[0].message.split("(")[1]
    # one variant folder given directly is judged by its own name
    assert len(check_abi(tmp_path / "build/torch-stable-abi213-cpu-x86_64-linux")) == 1


def test_not_an_elf_file_is_a_clear_error(tmp_path):
    (tmp_path / "v").mkdir()
    (tmp_path / "v/_x.abi3.so").write_text("not elf")
    with pytest.raises(KbuildError, match="not a readable ELF"):
        check_abi(tmp_path / "v")
    with pytest.raises(KbuildError, match="not a directory"):
        check_abi(tmp_path / "missing")


def test_limited_api_list_matches_cpython_headers(tmp_path):
    """The data file is what the headers declare under Py_LIMITED_API=0x03090000."""
    include = Path(sysconfig.get_paths()["include"])
    if shutil.which("gcc") is None or not (include / "Python.h").exists():
        pytest.skip("needs gcc and the Python headers")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the list was derived from CPython 3.11 headers")
    preprocessed = subprocess.run(
        ["gcc", "-E", "-P", "-DPy_LIMITED_API=0x03090000", f"-I{include}", "-x", "c", "-"],
        input="#include <Python.h>\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    declared = set()
    for match in re.finditer(r'__attribute__ \(\(visibility \("default"\)\)\)([^;{]*)[;{]', preprocessed):
        declaration = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", match.group(1))
        pointer = re.match(r"[^(]*\(\s*\*\s*([A-Za-z_]\w*)\s*\)", declaration)
        function = re.match(r"[^(]*?\b([A-Za-z_]\w*)\s*\(", declaration)
        if pointer or function:
            declared.add((pointer or function).group(1))
        else:
            declared.add(re.findall(r"([A-Za-z_]\w*)\s*(?:\[\s*\])?\s*$", declaration.strip())[0])
    assert declared == limited_api_symbols(), f"regenerate {LIMITED_API_FILE.name}"
    assert {"PyModule_Create2", "_Py_Dealloc", "_Py_NoneStruct"} <= declared
    assert "_PyObject_GetDictPtr" not in declared


def test_cli_check_abi(tmp_path, capsys):
    from kbuild.cli import main

    _compile(tmp_path, tmp_path / "good/torch213-cxx11-cpu-x86_64-linux/_x.abi3.so")
    _compile(tmp_path, tmp_path / "bad/torch213-cxx11-cpu-x86_64-linux/_x.abi3.so", "USE_PRIVATE_PYTHON")
    assert main(["check", "--abi", str(tmp_path / "good")]) == 0
    assert "ABI ok" in capsys.readouterr().out
    assert main(["check", "--abi", str(tmp_path / "bad")]) == 1
    assert "error: imports Python symbols outside the limited API 3.9" in capsys.readouterr().out


def test_static_libstdcxx_copy_is_detected(tmp_path):
    """A .so carrying its own libstdc++ crashes next to torch (seen on the H100 with a g++
    wrapper that linked libstdc++.a): the check must catch it and pass the shared link."""
    import shutil
    import subprocess

    from kbuild.build.abi import embedded_cxx_runtime

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    source = tmp_path / "fmt.cpp"
    source.write_text(
        "#include <sstream>\n#include <string>\n"
        "std::string f(long v) { std::ostringstream s; s << v; return s.str(); }\n"
    )
    static, shared = tmp_path / "static.so", tmp_path / "shared.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-static-libstdc++", source, "-o", static], check=True)
    subprocess.run(["g++", "-shared", "-fPIC", source, "-o", shared], check=True)
    assert "linked statically" in embedded_cxx_runtime(static)
    assert embedded_cxx_runtime(shared) is None


def test_a_kernel_folder_is_checked_once_per_library_not_in_its_build_trees(tmp_path, capsys):
    """`check --abi KERNEL_DIR`: the build trees under .kbuild/ hold the same libraries as build/."""
    from kbuild.cli import main

    kernel = tmp_path / "demo"
    staged = _compile(tmp_path, kernel / "build/torch213-cxx11-cpu-x86_64-linux/_x.abi3.so", "USE_PRIVATE_PYTHON")
    tree = kernel / ".kbuild/torch213-cxx11-cpu-x86_64-linux/extension.abi3.so"
    tree.parent.mkdir(parents=True)
    shutil.copy(staged, tree)
    assert main(["check", "--abi", str(kernel)]) == 1
    errors = [line for line in capsys.readouterr().out.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith(f"{staged}: error: imports Python symbols"), errors
