"""flake.nix and flake.lock, as far as they can be checked without fetching nixpkgs: the flake
parses, and its outputs evaluate (with Nix, against a small stand-in for nixpkgs) to a dev shell
with the toolchains and kbuild, and an app that runs `kbuild build`. Building them needs nixpkgs
and cannot happen here."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
NIX = shutil.which("nix-instantiate")
needs_nix = pytest.mark.skipif(NIX is None, reason="needs nix-instantiate (apt-get install nix-bin)")
# The Python of the pinned nixpkgs (nixos-25.11), for the environment markers of pyproject.toml.
NIXPKGS_PYTHON = "3.13"
# Runtime dependencies whose PyPI wheels only carry a tool: the flake takes nixpkgs' own build
# of the tool instead, in the dev shell and in the build app.
NATIVE_TOOLS = {"cmake", "ninja"}

# Just the parts of nixpkgs the flake touches: derivations are attribute sets with a name.
STUB_PKGS = """
system:
let
  drv = name: { type = "derivation"; inherit name; outPath = "/nix/store/0000-${name}"; };
  python = {
    buildPythonPackage = a: drv a.pname // { inherit (a) dependencies src; };
    toPythonApplication = p: p;
    setuptools = drv "setuptools"; jinja2 = drv "jinja2"; tomlkit = drv "tomlkit";
    tomli = drv "tomli"; packaging = drv "packaging"; pyyaml = drv "pyyaml";
    pyelftools = drv "pyelftools"; huggingface-hub = drv "huggingface-hub";
    filelock = drv "filelock"; kernels = drv "kernels";
    markdown-it-py = drv "markdown-it-py"; argcomplete = drv "argcomplete";
    torch = drv "torch"; pytest = drv "pytest";
  };
in {
  cmake = drv "cmake"; ninja = drv "ninja"; git = drv "git"; git-lfs = drv "git-lfs";
  python3Packages = python;
  python3.withPackages = f: drv "python3-env" // { contents = f python; };
  cudaPackages_13_0 = {
    cuda_nvcc = drv "cuda_nvcc"; cuda_cudart = drv "cuda_cudart"; cuda_cccl = drv "cuda_cccl";
  };
  mkShell = a: drv "shell" // a;
  writeShellApplication = a: drv a.name // a;
}
"""
EVAL = """
let
  flake = import %(root)s/flake.nix;
  nixpkgs = {
    outPath = %(stub)s;
    lib.genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  };
  self = flake.outputs { inherit self nixpkgs; } // { outPath = %(root)s; };
  names = map (p: p.name);
  shell = self.devShells.x86_64-linux.default;
  python = builtins.head (builtins.filter (p: p.name == "python3-env") shell.packages);
in {
  systems = builtins.attrNames self.devShells;
  shell = names shell.packages;
  python = names python.contents;
  kbuild = names (builtins.head python.contents).dependencies;
  cudaHome = shell.CUDA_HOME;
  app = self.apps.x86_64-linux.build;
  appDefault = self.apps.aarch64-linux.default.program;
  package = self.packages.x86_64-linux.default.name;
}
"""


@needs_nix
def test_flake_parses():
    subprocess.run([NIX, "--parse", str(ROOT / "flake.nix")], check=True, capture_output=True)


def pyproject_runtime_dependencies() -> set[str]:
    """pyproject.toml's runtime dependencies that apply to the flake's Python, canonical names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(line) for line in project["dependencies"]]
    environment = {"python_version": NIXPKGS_PYTHON, "python_full_version": f"{NIXPKGS_PYTHON}.0"}
    return {str(canonicalize_name(r.name)) for r in requirements if r.marker is None or r.marker.evaluate(environment)}


def evaluate_flake(tmp_path: Path) -> dict:
    stub = tmp_path / "nixpkgs"
    stub.mkdir()
    (stub / "pkgs.nix").write_text(STUB_PKGS)
    (stub / "default.nix").write_text("{ system, config }: assert config.allowUnfree; import ./pkgs.nix system\n")
    expression = EVAL % {"root": ROOT, "stub": stub}
    result = subprocess.run([NIX, "--eval", "--strict", "--json", "-E", expression], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@needs_nix
def test_flake_python_set_equals_pyproject_dependencies(tmp_path):
    """kbuild's Python dependencies in the flake are pyproject.toml's, no more and no fewer;
    the tool-only wheels (cmake, ninja) come from nixpkgs in the dev shell (and the build app)."""
    outputs = evaluate_flake(tmp_path)
    expected = pyproject_runtime_dependencies()
    assert set(outputs["kbuild"]) == expected - NATIVE_TOOLS
    assert NATIVE_TOOLS <= expected
    assert NATIVE_TOOLS <= set(outputs["shell"])


@needs_nix
def test_flake_outputs_evaluate(tmp_path):
    outputs = evaluate_flake(tmp_path)
    assert outputs["systems"] == ["aarch64-linux", "x86_64-linux"]
    assert {"cmake", "ninja", "git-lfs", "python3-env", "cuda_nvcc", "cuda_cudart"} <= set(outputs["shell"])
    assert outputs["python"] == ["kbuild", "torch", "pytest"]
    assert outputs["cudaHome"] == "/nix/store/0000-cuda_nvcc"
    app = outputs["app"]
    assert app["type"] == "app" and app["program"] == "/nix/store/0000-kbuild-build/bin/kbuild-build"
    assert outputs["appDefault"] == app["program"] and outputs["package"] == "kbuild"


def test_flake_lock_pins_the_input_of_flake_nix():
    lock = json.loads((ROOT / "flake.lock").read_text())
    assert lock["version"] == 7 and lock["root"] == "root"
    node = lock["nodes"][lock["nodes"]["root"]["inputs"]["nixpkgs"]]
    locked, original = node["locked"], node["original"]
    assert re.fullmatch(r"[0-9a-f]{40}", locked["rev"])
    assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", locked["narHash"])
    url = re.search(r'inputs\.nixpkgs\.url = "github:(\w+)/(\w+)/([\w.-]+)"', (ROOT / "flake.nix").read_text())
    assert url.groups() == (original["owner"], original["repo"], original["ref"])
