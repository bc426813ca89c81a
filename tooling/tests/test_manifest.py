import re
import warnings
from pathlib import Path

import pytest

from kbuild.cli import main
from kbuild.core.errors import KbuildError
from kbuild.model.manifest import load_manifest, upgrade_file


def rewrite(kernel_dir: Path, old: str, new: str) -> None:
    path = kernel_dir / "build.toml"
    text = path.read_text()
    assert old in text, f"test setup: {old!r} not in build.toml"
    path.write_text(text.replace(old, new))


def error_of(kernel_dir: Path) -> KbuildError:
    with pytest.raises(KbuildError) as info:
        load_manifest(kernel_dir)
    return info.value


def test_valid_manifest_loads(kernel_dir):
    manifest = load_manifest(kernel_dir)
    assert manifest.name == "demo" and manifest.version == 1 and manifest.backends == ["cpu"]
    assert manifest.repo_id == "kernels-community/demo"
    assert manifest.upload_branch == "v1"
    assert manifest.kernels["demo_cpu"].src == ["demo_cpu/demo.cpp"]


def test_toml_syntax_error_names_the_line(kernel_dir):
    rewrite(kernel_dir, 'license = "MIT"', 'license = "MIT')
    err = error_of(kernel_dir)
    assert "invalid TOML" in err.message and err.line == 5


def test_unknown_key_suggests_the_right_one(kernel_dir):
    rewrite(kernel_dir, 'depends = ["torch"]', 'depends = ["torch"]\ncuda-capabilites = ["8.0"]')
    err = error_of(kernel_dir)
    assert "[kernel.demo_cpu] cuda-capabilites: unknown key" in err.message
    assert err.fix == "did you mean `cuda-capabilities`?"
    assert err.line == 14


def test_unknown_table(kernel_dir):
    rewrite(kernel_dir, "[torch]", "[troch]")
    err = error_of(kernel_dir)
    assert "unknown table `[troch]`" in err.message and "[torch]" in err.fix


def test_wrong_type(kernel_dir):
    rewrite(kernel_dir, "version = 1", 'version = "1"')
    err = error_of(kernel_dir)
    assert err.message == '[general] version: expected an integer, got string "1"'
    assert err.fix == "write an integer, e.g. `version = 1`"
    assert err.line == 3


def test_missing_required_key(kernel_dir):
    rewrite(kernel_dir, 'license = "MIT"\n', "")
    err = error_of(kernel_dir)
    assert "missing required key `license`" in err.message
    assert err.fix == 'add `license = "Apache-2.0"` to [general]'


def test_missing_source_file(kernel_dir):
    rewrite(kernel_dir, '"demo_cpu/demo.cpp"', '"demo_cpu/missing.cpp"')
    err = error_of(kernel_dir)
    assert "`demo_cpu/missing.cpp` does not exist" in err.message
    assert "src" in err.message and err.line == 14


def test_backend_without_kernel_table(kernel_dir):
    rewrite(kernel_dir, 'backends = ["cpu"]', 'backends = ["cpu", "cuda"]')
    err = error_of(kernel_dir)
    assert "backend `cuda` has no [kernel.*] table" in err.message
    assert 'backend = "cuda"' in err.fix


def test_unknown_depends(kernel_dir):
    rewrite(kernel_dir, 'depends = ["torch"]', 'depends = ["torch", "cutlass_9_9"]')
    err = error_of(kernel_dir)
    assert "unknown value `cutlass_9_9`" in err.message and "valid:" in err.fix


def test_backend_specific_key_on_the_wrong_backend(kernel_dir):
    rewrite(kernel_dir, 'depends = ["torch"]', 'depends = ["torch"]\nrocm-archs = ["gfx942"]')
    err = error_of(kernel_dir)
    assert "applies to backend `rocm` only" in err.message


def test_cli_prints_file_line_and_fix_without_traceback(kernel_dir, capsys):
    rewrite(kernel_dir, 'depends = ["torch"]', 'depnds = ["torch"]')
    assert main(["check", str(kernel_dir)]) == 2
    out = capsys.readouterr().out
    assert f"{kernel_dir / 'build.toml'}:13: error: [kernel.demo_cpu] depnds: unknown key" in out
    assert main(["build", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {kernel_dir / 'build.toml'}:13:")
    assert "fix: did you mean `depends`?" in err and "Traceback" not in err


EDITION_2 = """\
# The 2025 format
[general]
name = "demo"
universal = false

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.demo_cpu]
backend = "cpu"  # keep this comment
depends = ["torch"]
src = ["demo_cpu/demo.cpp"]
"""


def test_edition_4_is_upgraded_in_memory_with_a_warning(kernel_dir):
    toml = kernel_dir / "build.toml"
    edition_5 = toml.read_text()
    assert "edition = 5\n" in edition_5
    toml.write_text(edition_5.replace("edition = 5\n", ""))  # edition 4: no `edition` key
    with pytest.warns(UserWarning, match="reading it as edition 4"):
        manifest = load_manifest(kernel_dir)
    assert manifest.general.edition == 5 and manifest.source_edition == 4


def test_edition_2_warning_says_what_to_add(kernel_dir):
    (kernel_dir / "build.toml").write_text(EDITION_2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manifest = load_manifest(kernel_dir)
    message = str(caught[0].message)
    assert 'edition = 5, version = 1, license = "<SPDX id>", backends = ["cpu"]' in message
    assert "remove `universal`" in message
    assert manifest.backends == ["cpu"] and manifest.source_edition == 2


def test_update_build_persists_the_upgrade_and_keeps_comments(kernel_dir):
    (kernel_dir / "build.toml").write_text(EDITION_2)
    with pytest.raises(KbuildError, match="no license"):
        upgrade_file(kernel_dir)
    assert main(["update-build", "--license", "MIT", str(kernel_dir)]) == 0
    text = (kernel_dir / "build.toml").read_text()
    assert "# keep this comment" in text and "universal" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        manifest = load_manifest(kernel_dir)
    assert (manifest.general.edition, manifest.general.license, manifest.backends) == (5, "MIT", ["cpu"])


# Every key of the build.toml format (edition 5), table by table, as kernel-builder defines it.
FORMAT_KEYS = {
    "general": [
        "name", "version", "edition", "license", "backends", "upstream", "source", "python-depends",
        "kernel-depends", "hub", "cuda", "xpu", "neuron", "tpu",
    ],
    "general.kernel-depends": ["repo-id", "version", "revision"],
    "general.hub": ["repo-id", "branch"],
    "general.cuda": ["minver", "maxver", "python-depends", "kernel-depends"],
    "general.xpu": ["python-depends", "kernel-depends"],
    "general.neuron": ["python-depends", "kernel-depends"],
    "general.tpu": ["python-depends"],
    "torch": ["src", "include", "pyext", "minver", "maxver", "cxx-flags", "stable-abi"],
    "torch-noarch": ["pyext", "cuda_capabilities", "rocm_archs"],
    "tvm-ffi": ["src", "include", "pyext", "cxx-flags"],
    "kernel.<name>": [
        "backend", "depends", "src", "include", "cxx-flags", "cuda-capabilities", "cuda-flags", "cuda-minver",
        "rocm-archs", "hip-flags", "sycl-flags",
    ],
}  # fmt: skip


def test_the_schema_classes_have_exactly_the_keys_of_the_format():
    from kbuild.model.manifest import (
        CudaGeneral,
        General,
        Hub,
        KernelDependency,
        KernelSpec,
        NeuronGeneral,
        NoarchSpec,
        TorchSpec,
        TpuGeneral,
        TvmFfiSpec,
        XpuGeneral,
    )
    from kbuild.model.schema import fields_of

    classes = {
        "general": General,
        "general.kernel-depends": KernelDependency,
        "general.hub": Hub,
        "general.cuda": CudaGeneral,
        "general.xpu": XpuGeneral,
        "general.neuron": NeuronGeneral,
        "general.tpu": TpuGeneral,
        "torch": TorchSpec,
        "torch-noarch": NoarchSpec,
        "tvm-ffi": TvmFfiSpec,
        "kernel.<name>": KernelSpec,
    }
    assert {table: [f.toml for f in fields_of(cls)] for table, cls in classes.items()} == FORMAT_KEYS


@pytest.mark.filterwarnings("error::FutureWarning")  # a regex with `[[` warns "Possible nested set"
def test_every_key_of_the_format_is_accepted(tmp_path):
    """The corpus's edition 5 manifests use every key of the format, and kbuild reads them."""
    from manifest_fuzz import DATA, kernel_folder

    paths = [DATA / name for name in ("e5-every-key.toml", "e5-noarch.toml", "e5-tvm-ffi.toml")]
    texts = "".join(path.read_text() for path in paths)
    for table, keys in FORMAT_KEYS.items():
        for key in keys:
            assert re.search(rf"^{re.escape(key)} = |[\[.{{ ]{re.escape(key)}[\].= ]", texts, re.M), (table, key)
    for path in paths:
        assert load_manifest(kernel_folder(path, tmp_path)).general.edition == 5


def test_sub_table_of_general_from_the_kernels_library_is_accepted(kernel_dir):
    rewrite(kernel_dir, "[torch]", '[general.neuron]\npython-depends = ["nki"]\n\n[torch]')
    assert load_manifest(kernel_dir).python_depends_for("neuron") == ["nki"]


def test_unknown_table_is_reported_on_its_own_line(kernel_dir):
    rewrite(kernel_dir, "[torch]", "[general.nueron]\npython-depends = []\n\n[torch]")
    err = error_of(kernel_dir)
    assert err.message == "[general] nueron: unknown key `nueron`" and err.line == 8
    assert err.fix == "did you mean `neuron`?"
    (kernel_dir / "build.toml").write_text((kernel_dir / "build.toml").read_text() + "\n[extra]\nx = 1\n")
    rewrite(kernel_dir, "[general.nueron]\npython-depends = []\n", "")
    err = error_of(kernel_dir)
    assert err.message == "unknown table `[extra]`" and err.line == 17


def test_unknown_value_lists_the_valid_ones_and_the_closest(kernel_dir):
    rewrite(kernel_dir, 'backends = ["cpu"]', 'backends = ["cpu", "cdua"]')
    err = error_of(kernel_dir)
    assert err.message == "[general] backends: unknown value `cdua`" and err.line == 6
    assert err.fix == "did you mean `cuda`? valid: cpu, cuda, metal, rocm, xpu, cann, neuron, tpu"


def test_gpu_is_not_taken_for_xpu(kernel_dir):
    rewrite(kernel_dir, 'backends = ["cpu"]', 'backends = ["cpu", "gpu"]')
    err = error_of(kernel_dir)
    assert err.message == "[general] backends: unknown value `gpu`"
    assert "xpu`?" not in (err.fix or "") and "cuda (NVIDIA), rocm (AMD), xpu (Intel), metal (Apple)" in (err.fix or "")
    rewrite(kernel_dir, '"gpu"', '"nvidia"')
    assert (error_of(kernel_dir).fix or "").startswith("did you mean `cuda`?")


def test_missing_source_suggests_the_file_of_a_close_name(kernel_dir):
    rewrite(kernel_dir, '"demo_cpu/demo.cpp"', '"demo_cpu/dmeo.cpp"')
    err = error_of(kernel_dir)
    assert "`demo_cpu/dmeo.cpp` does not exist" in err.message
    assert (err.fix or "").startswith("did you mean `demo_cpu/demo.cpp`?")
    rewrite(kernel_dir, '"demo_cpu/dmeo.cpp"', '"other/unrelated_name.cu"')
    assert "did you mean" not in (error_of(kernel_dir).fix or "")


# Each class of invalid build.toml: `check` and `build` print the same diagnostic and exit 2.
BAD_EDITS = {
    "typo in a key": ('depends = ["torch"]', 'depends = ["torch"]\ncuda-capabilites = ["8.0"]'),
    "unknown value": ('backends = ["cpu"]', 'backends = ["cdua"]'),
    "wrong type": ("version = 1", "version = [1]"),
    "missing key": ('license = "MIT"\n', ""),
    "syntax": ('license = "MIT"', "license = MIT"),
    "missing source": ('"demo_cpu/demo.cpp"', '"demo_cpu/missing.cpp"'),
    "rule across tables": ('backends = ["cpu"]', 'backends = ["cpu", "cuda"]'),
}


@pytest.mark.parametrize("edit", BAD_EDITS)
def test_check_and_build_print_the_same_diagnostic(kernel_dir, capsys, edit):
    rewrite(kernel_dir, *BAD_EDITS[edit])
    expected = str(error_of(kernel_dir))
    assert "\n  fix: " in expected
    assert main(["check", str(kernel_dir)]) == 2
    path, rest = expected.split(": ", 1)
    assert capsys.readouterr().out == f"{path}: error: {rest}\n"
    assert main(["build", str(kernel_dir)]) == 2
    assert capsys.readouterr().err == f"error: {expected}\n"


@pytest.mark.parametrize("given", ["missing", "file", "no build.toml"])
def test_check_and_build_agree_on_what_is_not_a_kernel_folder(kernel_dir, capsys, given):
    path = {
        "missing": kernel_dir / "nope",
        "file": kernel_dir / "build.toml",
        "no build.toml": kernel_dir / "torch-ext",
    }[given]
    assert main(["check", str(path)]) == 2
    check_err = capsys.readouterr().err
    assert main(["build", str(path)]) == 2
    assert capsys.readouterr().err == check_err and "fix: " in check_err


def test_check_exits_2_when_any_kernel_is_invalid(kernel_dir, tmp_path, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(kernel_dir, broken)
    rewrite(broken, "version = 1", 'version = "1"')
    assert main(["check", str(broken), str(kernel_dir)]) == 2
    assert main(["check", str(kernel_dir), str(broken)]) == 2
    assert f"{kernel_dir / 'tests'}: warning: no tests" in capsys.readouterr().out, "the valid kernel is checked too"
