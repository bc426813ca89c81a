"""The backend registry (kbuild.model.backends): one record per backend build.toml accepts, and the
CMake fragment of each compiled one."""

from pathlib import Path

import pytest

from kbuild.build.builder import generate_only
from kbuild.core.errors import KbuildError
from kbuild.model import backends
from kbuild.model.manifest import KernelSpec, load_manifest
from kbuild.model.schema import fields_of
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


@pytest.mark.parametrize("backend", backends.compiled())
def test_build_toml_compiles_each_compiled_backend(kernel_dir, backend):
    _with_kernel_of(kernel_dir, backend)
    assert f"extra_{backend}" in [k.name for k in load_manifest(kernel_dir).kernels_for(backend)]


@pytest.mark.parametrize("backend", [*backends.experimental(), "cobol"])
def test_kernel_tables_refuse_experimental_and_unknown_backends(kernel_dir, backend):
    _with_kernel_of(kernel_dir, backend)
    with pytest.raises(KbuildError, match=f"`{backend}`"):
        load_manifest(kernel_dir)


@pytest.mark.parametrize("backend", backends.experimental())
def test_noarch_kernels_take_experimental_backends(tmp_path, backend):
    (tmp_path / "torch-ext" / "demo").mkdir(parents=True)
    (tmp_path / "torch-ext" / "demo" / "__init__.py").write_text("")
    (tmp_path / "build.toml").write_text(TORCH_NOARCH + f'backends = ["{backend}"]\n')
    assert load_manifest(tmp_path).backends == [backend]


def test_every_backend_build_toml_accepts_has_a_record_and_a_fragment():
    assert set(backends.names()) == set(backends.by_name())
    assert set(backends.compiled()) == {b.name for b in backends.ALL if b.compiled}
    assert {p.name for p in FRAGMENTS.glob("*.cmake.j2")} == {f"{name}.cmake.j2" for name in backends.compiled()}
    for record in backends.ALL:
        assert not record.compiled or record.define, record.name


def test_every_backend_init_scaffolds_has_its_kernel_table():
    init = FRAGMENTS.parents[1] / "init"
    tables = {p.name for p in (init / "backends").glob("*.toml.j2")}
    assert tables == {f"{name}.toml.j2" for name in backends.scaffolded()}
    template = (init / "build.toml.j2").read_text()
    assert not any(f'"{name}"' in template for name in backends.names())


def test_the_main_cmake_template_names_no_backend():
    template = (FRAGMENTS.parent / "CMakeLists.txt.j2").read_text()
    assert "backend ==" not in template and not any(f'"{name}"' in template for name in backends.names())


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
    assert [Variant.parse(f"torch-{name}").backend for name in backends.names()] == list(backends.names())


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
    build.toml schema (its examples) and the ROCm toolchain's messages."""
    package = Path(backends.__file__).parents[1]
    allowed = {"backends.py", "manifest.py", "rocm.py"}
    for literal in ('"cuda"', '"rocm"'):
        modules = {path.name for path in package.rglob("*.py") if literal in path.read_text(encoding="utf-8")}
        assert modules <= allowed and len(modules) <= 3, (literal, sorted(modules))


# A backend of these tests only: its record is all kbuild needs, with a CMake fragment (here the
# CPU's: it compiles C++ with its own compile definition and device flags).
TESTGPU = backends.Backend(
    "testgpu",
    "TestGPU",
    define="TESTGPU_KERNEL",
    fragment="backends/cpu.cmake.j2",
    device_flags=("-DTESTGPU_DEVICE_CODE",),
    tag="tg",
    tag_digits=r"\d{2,}",
)


@pytest.fixture
def testgpu(monkeypatch):
    monkeypatch.setattr(backends, "ALL", (*backends.ALL, TESTGPU))
    return TESTGPU


def test_a_backend_is_one_registry_record(kernel_dir, testgpu):
    _with_kernel_of(kernel_dir, "testgpu")
    manifest = load_manifest(kernel_dir)
    assert [k.name for k in manifest.kernels_for("testgpu")] == ["extra_testgpu"]

    variant = Variant("2.13", "testgpu", "1.0")
    assert variant.name == "torch213-cxx11-tg10-x86_64-linux"
    assert Variant.parse(variant.name) == variant
    assert Variant.parse("torch-testgpu").backend == "testgpu"

    cmake = (generate_only(kernel_dir, variant.name) / "CMakeLists.txt").read_text()
    assert "[[TESTGPU_KERNEL]]" in cmake and ":-DTESTGPU_DEVICE_CODE>]]" in cmake


def test_a_backend_not_registered_is_refused(kernel_dir):
    _with_kernel_of(kernel_dir, "testgpu")
    with pytest.raises(KbuildError, match="unknown value `testgpu`"):
        load_manifest(kernel_dir)
    with pytest.raises(KbuildError, match="not a build variant name"):
        Variant.parse("torch213-cxx11-tg10-x86_64-linux")


def test_records_are_data():
    """A record holds names, flags and switches that readers and tools can follow: no functions."""
    for record in backends.ALL:
        for name, value in vars(record).items():
            assert not callable(value), (record.name, name)


def test_each_backend_only_key_names_a_kernel_field():
    fields = {f.name for f in fields_of(KernelSpec)}
    for record in backends.ALL:
        assert set(record.kernel_keys) <= fields, record.name
