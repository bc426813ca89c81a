"""Flags, source and folder names of build.toml (issue 40): a flag that names a file or folder
outside the kernel, or makes the compiler run another program, is refused with exit 2 naming
the key; the names of sources, include folders and the kernel folder hold no CMake syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbuild.build.builder import generate_only
from kbuild.cli import main
from kbuild.core.errors import ManifestError
from kbuild.model.manifest import load_manifest

OUTSIDE = [
    ["-I/etc"],
    ["-I", "/etc"],
    ["-I=/etc"],
    ["-isystem/usr/include"],
    ["-isystem", "/usr/include"],
    ["-iquote/etc"],
    ["-idirafter/etc"],
    ["-include/etc/passwd"],
    ["-include", "/etc/passwd"],
    ["-imacros/etc/passwd"],
    ["-L/usr/lib"],
    ["@/etc/passwd"],
    ["--include-path=/etc"],
    ["--include-path", "/etc"],
    ["-Xcompiler=-I/etc"],
    ["-Xcompiler", "-isystem,/etc"],
    ["--compiler-options=-O2,-include,/etc/passwd"],
    ["-Wp,-I,/etc"],
    ["-I ../../../../.."],
    ["-I~/secrets"],
    ["-fprofile-use=/etc/profile.d"],
    ["-MF/tmp/deps.d"],
    ["-o/tmp/out.o"],
]
PROGRAMS = [
    ["-B/tmp/evil"],
    ["-specs=evil.specs"],
    ["-fplugin=./evil.so"],
    ["-wrapper", "sh,-c,touch,x"],
    ["-ccbin=/tmp/evil-gcc"],
    ["--compiler-bindir", "/usr/bin"],
    ["-Xcompiler=-fplugin=evil.so"],
    ["--config=evil.cfg"],
    ["-Xclang", "-load", "-Xclang", "evil.so"],
]
INSIDE = [
    ["-O3", "-std=c++17", "-fopenmp", "-march=native", "-DPATH=/etc", "-Wno-unused"],
    ["-I../../include", "-include", "../../include/config.h"],
    ["-Xcompiler=-fno-strict-aliasing", "--threads=4", "-gencode=arch=compute_80,code=[sm_80,compute_80]"],
    ['-DNAME="a b"', "-DX=a>b,c", "-DH=a#b(c)"],
]


def _with_flags(kernel_dir: Path, flags: list[str]) -> None:
    toml = kernel_dir / "build.toml"
    listed = ", ".join('"' + f.replace("\\", "\\\\").replace('"', '\\"') + '"' for f in flags)
    toml.write_text(
        toml.read_text().replace('src = ["demo_cpu/demo.cpp"]', f'src = ["demo_cpu/demo.cpp"]\ncxx-flags = [{listed}]')
    )


@pytest.mark.parametrize("flags", OUTSIDE, ids=" ".join)
def test_a_flag_naming_a_path_outside_the_kernel_is_refused(kernel_dir, flags):
    _with_flags(kernel_dir, flags)
    with pytest.raises(
        ManifestError, match=r"\[kernel.demo_cpu\] cxx-flags: the flag .* is outside the kernel folder"
    ) as err:
        load_manifest(kernel_dir)
    assert err.value.line is not None and "include" in (err.value.fix or "")


@pytest.mark.parametrize("flags", PROGRAMS, ids=" ".join)
def test_a_flag_that_runs_another_program_is_refused(kernel_dir, flags):
    _with_flags(kernel_dir, flags)
    with pytest.raises(ManifestError, match=r"\[kernel.demo_cpu\] cxx-flags: the flag .* run or load another program"):
        load_manifest(kernel_dir)


@pytest.mark.parametrize("flags", INSIDE, ids=" ".join)
def test_flags_inside_the_kernel_are_kept_as_written(kernel_dir, flags):
    (kernel_dir / "include").mkdir()
    _with_flags(kernel_dir, flags)
    assert load_manifest(kernel_dir).kernels["demo_cpu"].cxx_flags == flags
    generate_only(kernel_dir)


def test_a_flag_through_a_symlink_out_of_the_kernel_is_refused(kernel_dir, tmp_path):
    (tmp_path / "outside").mkdir()
    (kernel_dir / "inc").symlink_to(tmp_path / "outside")
    _with_flags(kernel_dir, ["-I../../inc"])
    with pytest.raises(ManifestError, match=r"names `../../inc`, which is outside the kernel folder"):
        load_manifest(kernel_dir)


def test_refused_flags_exit_2_naming_build_toml_and_the_key(kernel_dir, capsys):
    _with_flags(kernel_dir, ["-I/etc"])
    assert main(["generate", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{kernel_dir / 'build.toml'}:" in err and "[kernel.demo_cpu] cxx-flags" in err and "fix:" in err


@pytest.mark.parametrize(("table", "key"), [("torch", "src"), ("torch", "include"), ("kernel.demo_cpu", "include")])
@pytest.mark.parametrize("name", ['a"b', "a$b", "a;b", "a<b", "a>b", "a\\b", "a\nb", "a#b", "a(b", "a)b", "a[b", "a{b"])
def test_cmake_special_characters_in_source_and_folder_names_are_refused(kernel_dir, table, key, name, capsys):
    (kernel_dir / name).mkdir()
    (kernel_dir / name / "x.cpp").write_text("// placeholder\n")
    value = f"{name}/x.cpp" if key == "src" else name
    toml = kernel_dir / "build.toml"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    text = toml.read_text()
    if key == "src":
        text = text.replace('src = ["torch-ext/torch_binding.cpp"]', f'src = ["{escaped}"]')
    else:
        text = text.replace(f"[{table}]\n", f'[{table}]\n{key} = ["{escaped}"]\n')
    toml.write_text(text)
    assert main(["generate", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert f"[{table}] {key}:" in err and "which CMake reads as syntax" in err and "fix: rename it" in err


def test_a_kernel_folder_whose_name_holds_a_line_break_is_refused(kernel_dir, capsys):
    moved = kernel_dir.rename(kernel_dir.with_name("demo\nexecute_process(COMMAND touch pwned)"))
    assert main(["generate", str(moved)]) == 2
    err = capsys.readouterr().err
    assert "the kernel folder" in err and "fix: rename it" in err
    assert not list(moved.parent.rglob("pwned"))
