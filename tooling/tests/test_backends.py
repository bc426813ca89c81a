"""The backend registry (kbuild.model.backends): one record per backend build.toml accepts, and the
CMake fragment of each compiled one."""

from pathlib import Path

import pytest

from kbuild.build.builder import generate_only
from kbuild.core.errors import KbuildError
from kbuild.model import backends
from kbuild.model.manifest import ALL_BACKENDS, BACKENDS, load_manifest
from kbuild.model.variants import Variant

FRAGMENTS = Path(backends.__file__).parents[1] / "templates" / "project" / "backends"
TORCH_NOARCH = '[torch-noarch]\n[general]\nname = "demo"\nversion = 1\nedition = 5\nlicense = "MIT"\n'


def _with_kernel_of(kernel_dir: Path, backend: str) -> None:
    toml = kernel_dir / "build.toml"
    text = toml.read_text()
    if backend != "cpu":
        text = text.replace('backends = ["cpu"]', f'backends = ["cpu", "{backend}"]')
    table = f'[kernel.extra_{backend}]\nbackend = "{backend}"\ndepends = ["torch"]\nsrc = ["demo_cpu/demo.cpp"]\n'
    toml.write_text(f"{text}\n{table}")


@pytest.mark.parametrize("backend", backends.COMPILED)
def test_build_toml_compiles_each_compiled_backend(kernel_dir, backend):
    _with_kernel_of(kernel_dir, backend)
    assert f"extra_{backend}" in [k.name for k in load_manifest(kernel_dir).kernels_for(backend)]


@pytest.mark.parametrize("backend", [*backends.EXPERIMENTAL, "cobol"])
def test_kernel_tables_refuse_experimental_and_unknown_backends(kernel_dir, backend):
    _with_kernel_of(kernel_dir, backend)
    with pytest.raises(KbuildError, match=f"`{backend}`"):
        load_manifest(kernel_dir)


@pytest.mark.parametrize("backend", backends.EXPERIMENTAL)
def test_noarch_kernels_take_experimental_backends(tmp_path, backend):
    (tmp_path / "torch-ext" / "demo").mkdir(parents=True)
    (tmp_path / "torch-ext" / "demo" / "__init__.py").write_text("")
    (tmp_path / "build.toml").write_text(TORCH_NOARCH + f'backends = ["{backend}"]\n')
    assert load_manifest(tmp_path).backends == [backend]


def test_every_backend_build_toml_accepts_has_a_record_and_a_fragment():
    assert set(ALL_BACKENDS) == set(backends.BY_NAME)
    assert set(BACKENDS) == {b.name for b in backends.ALL if b.compiled}
    assert {p.name for p in FRAGMENTS.glob("*.cmake.j2")} == {f"{name}.cmake.j2" for name in BACKENDS}
    for record in backends.ALL:
        assert not record.compiled or record.define, record.name


def test_every_backend_init_scaffolds_has_its_kernel_table():
    init = FRAGMENTS.parents[1] / "init"
    tables = {p.name for p in (init / "backends").glob("*.toml.j2")}
    assert tables == {f"{name}.toml.j2" for name in backends.SCAFFOLDED}
    template = (init / "build.toml.j2").read_text()
    assert not any(f'"{name}"' in template for name in backends.BY_NAME)


def test_the_main_cmake_template_names_no_backend():
    template = (FRAGMENTS.parent / "CMakeLists.txt.j2").read_text()
    assert "backend ==" not in template and not any(f'"{name}"' in template for name in backends.BY_NAME)


TOOLKITS = {"cuda": ("13.0", "cu130"), "rocm": ("7.1", "rocm71"), "xpu": ("2026.0", "xpu20260")}


def test_every_tagged_backend_has_a_variant_tag_test():
    assert set(TOOLKITS) == {b.name for b in backends.ALL if b.tag}


@pytest.mark.parametrize(("backend", "toolkit", "tag"), [(name, *pair) for name, pair in TOOLKITS.items()])
def test_variant_tags_round_trip(backend, toolkit, tag):
    variant = Variant("2.13", backend, toolkit)
    assert variant.compute == tag
    assert Variant.parse(variant.name) == variant
    assert backends.from_tag(tag) == (backend, toolkit)


def test_noarch_variant_names_cover_every_backend():
    assert [Variant.parse(f"torch-{name}").backend for name in backends.BY_NAME] == list(backends.BY_NAME)


def test_unknown_backend_and_tag_are_errors():
    with pytest.raises(KbuildError, match="`cobol` is not a backend"):
        backends.get("cobol")
    with pytest.raises(KbuildError, match="variant tag"):
        backends.from_tag("cobol12")


@pytest.mark.parametrize(
    ("variant", "backend"),
    [
        ("torch213-cxx11-cpu-x86_64-linux", backends.CPU),
        ("torch213-cxx11-xpu20260-x86_64-linux", backends.XPU),
    ],
)
def test_generated_project_takes_the_records_define_and_libraries(kernel_dir, variant, backend):
    if backend is not backends.CPU:
        _with_kernel_of(kernel_dir, backend.name)
    cmake = (generate_only(kernel_dir, variant) / "CMakeLists.txt").read_text()
    assert f"[[{backend.define}]]" in cmake
    assert all(f"lib{lib}.so]]" in cmake for lib in backend.torch_libraries)
    assert "CUDA::cudart" not in cmake


def test_backend_names_are_spelled_out_in_few_modules():
    """The literal names "cuda" and "rocm" appear in at most 3 modules: the registry, the
    build.toml schema (which keys belong to which backend) and the toolkit modules."""
    package = Path(backends.__file__).parents[1]
    allowed = {"backends.py", "manifest.py", "cuda.py", "rocm.py"}
    for literal in ('"cuda"', '"rocm"'):
        modules = {path.name for path in package.rglob("*.py") if literal in path.read_text(encoding="utf-8")}
        assert modules <= allowed and len(modules) <= 3, (literal, sorted(modules))
