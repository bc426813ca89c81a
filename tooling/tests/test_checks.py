from kbuild.build.registration import check_op_registration
from kbuild.check.kernel_checks import check_kernel

FIXED = """\
import torch
from ._ops import add_op_namespace_prefix

@torch.library.custom_op("relu::fixed", mutates_args=())
def fixed(x: torch.Tensor) -> torch.Tensor:
    return x

@torch.library.register_fake(add_op_namespace_prefix("ok"))
def ok(x):
    return x
"""


def test_fixed_namespace_is_an_error_with_file_and_line(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(FIXED)
    findings = check_op_registration(path)
    assert len(findings) == 1
    assert findings[0].line == 4 and findings[0].severity == "error"
    assert str(findings[0]).startswith(f"{path}:4: error: `@custom_op` on `fixed` registers a fixed op name")


def test_prefixed_registration_passes(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(FIXED.replace('"relu::fixed"', 'add_op_namespace_prefix("fixed")'))
    assert check_op_registration(path) == []


def test_kernel_with_fixed_namespace_fails_check(kernel_dir):
    (kernel_dir / "torch-ext" / "demo" / "layers.py").write_text(FIXED)
    errors = [f for f in check_kernel(kernel_dir) if f.severity == "error"]
    assert [f.line for f in errors] == [4]


def test_layout_nested_package_and_missing_init(kernel_dir):
    (kernel_dir / "torch-ext" / "demo" / "demo").mkdir()
    messages = [f.message for f in check_kernel(kernel_dir)]
    assert any("nested package" in m for m in messages)
    (kernel_dir / "torch-ext" / "demo" / "__init__.py").unlink()
    messages = [f.message for f in check_kernel(kernel_dir)]
    assert any("missing: the kernel's Python package" in m for m in messages)


def test_manifest_errors_become_findings(kernel_dir):
    (kernel_dir / "build.toml").write_text("[general\n")
    findings = check_kernel(kernel_dir)
    assert findings and "invalid TOML" in findings[0].message and findings[0].line == 1


BINDING = """\
#include "registration.h"
// TORCH_LIBRARY(in_a_comment, ops) is not code
const char* text = "TORCH_LIBRARY(in_a_string, ops)";
#define MY_LIBRARY(NAME, M) TORCH_LIBRARY(NAME, M)

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("demo(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {}
STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {}
"""


def test_cpp_registration_in_the_build_namespace_passes(kernel_dir):
    (kernel_dir / "torch-ext" / "torch_binding.cpp").write_text(BINDING)
    assert check_kernel(kernel_dir) == [
        f for f in check_kernel(kernel_dir) if f.severity == "warning"
    ]  # only the missing-tests warning


def test_literal_cpp_namespace_is_an_error_with_a_fix(kernel_dir, capsys):
    from kbuild.cli import main

    binding = BINDING + "\nTORCH_LIBRARY(my_op, ops) {\n}\nTORCH_LIBRARY_IMPL_EXPAND(my_op, CUDA, ops) {}\n"
    (kernel_dir / "torch-ext" / "torch_binding.cpp").write_text(binding)
    errors = [f for f in check_kernel(kernel_dir) if f.severity == "error"]
    assert [f.line for f in errors] == [12, 14]
    assert "`TORCH_LIBRARY(my_op, ...)` registers ops under a fixed namespace" in errors[0].message
    assert errors[0].fix == "write `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)` (registration.h defines it)"
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, <dispatch key>, ops)" in (errors[1].fix or "")
    assert main(["check", str(kernel_dir)]) == 1
    out = capsys.readouterr().out
    assert f"{kernel_dir / 'torch-ext' / 'torch_binding.cpp'}:12: error:" in out and "fix: write" in out


def test_literal_namespace_in_a_kernel_source_is_found(kernel_dir):
    (kernel_dir / "demo_cpu" / "demo.cpp").write_text("STABLE_TORCH_LIBRARY(demo, ops) {}\n")
    errors = [f for f in check_kernel(kernel_dir) if f.severity == "error"]
    assert [(f.path.name, f.line) for f in errors] == [("demo.cpp", 1)]
    assert "STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)" in (errors[0].fix or "")


def test_registration_macro_that_does_not_expand_is_told_to_expand(kernel_dir):
    binding = "TORCH_LIBRARY(TORCH_EXTENSION_NAME, ops) {}\nTORCH_LIBRARY_IMPL(TORCH_EXTENSION_NAME, CPU, ops) {}\n"
    (kernel_dir / "torch-ext" / "torch_binding.cpp").write_text(binding)
    errors = [f for f in check_kernel(kernel_dir) if f.severity == "error"]
    assert [f.line for f in errors] == [1, 2]
    assert "`TORCH_LIBRARY` does not expand its arguments" in errors[0].message
    assert "literal namespace `TORCH_EXTENSION_NAME`" in errors[0].message
    assert "use TORCH_EXTENSION_NAME" not in errors[0].message.lower()
    assert (errors[0].fix or "").startswith("write `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)`")
    assert (errors[1].fix or "").startswith(
        "write `TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, <dispatch key>, ops)`"
    )


def test_fixed_python_op_name_has_a_fix_line(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(FIXED)
    (finding,) = check_op_registration(path)
    assert finding.fix == (
        'write `@torch.library.custom_op(add_op_namespace_prefix("fixed"), ...)` '
        "with `from ._ops import add_op_namespace_prefix`"
    )
    assert "\n  fix: write `@torch.library.custom_op(" in str(finding)


OP_METHODS = """\
import torch
import torch.library as tl
from torch import library
from ._ops import add_op_namespace_prefix

@torch.library.custom_op(add_op_namespace_prefix("scale"), mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2

@scale.register_fake
def _(x):
    return torch.empty_like(x)

@scale.register_kernel("cuda")
def _cuda(x):
    return x * 2

@torch.library.register_fake("fixed::name")
def fixed(x):
    return x

@tl.register_kernel("fixed::name", "cpu")
def fixed_cpu(x):
    return x

@library.register_fake("fixed::other")
def other(x):
    return x
"""


def test_methods_of_an_op_object_take_no_name(tmp_path):
    path = tmp_path / "ops.py"
    path.write_text(OP_METHODS)
    findings = check_op_registration(path)
    assert [(f.line, f.message.split("`")[1]) for f in findings] == [
        (18, "@register_fake"),
        (22, "@register_kernel"),
        (26, "@register_fake"),
    ]
