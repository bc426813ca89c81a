"""flake.nix and flake.lock, as far as they can be checked without fetching nixpkgs: the flake
parses, and its outputs evaluate (with Nix, against a small stand-in for nixpkgs) to a dev shell
with the toolchains and kbuild, and an app that runs `kbuild build`. Building them needs nixpkgs
and cannot happen here."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NIX = shutil.which("nix-instantiate")
needs_nix = pytest.mark.skipif(NIX is None, reason="needs nix-instantiate (apt-get install nix-bin)")

# Just the parts of nixpkgs the flake touches: derivations are attribute sets with a name.
STUB_PKGS = """
system:
let
  drv = name: { type = "derivation"; inherit name; outPath = "/nix/store/0000-${name}"; };
  python = {
    buildPythonPackage = a: drv a.pname // { inherit (a) dependencies src; };
    toPythonApplication = p: p;
    setuptools = drv "setuptools"; jinja2 = drv "jinja2"; tomlkit = drv "tomlkit";
    packaging = drv "packaging"; pyelftools = drv "pyelftools";
    huggingface-hub = drv "huggingface-hub";
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


@needs_nix
def test_flake_outputs_evaluate(tmp_path):
    stub = tmp_path / "nixpkgs"
    stub.mkdir()
    (stub / "pkgs.nix").write_text(STUB_PKGS)
    (stub / "default.nix").write_text("{ system, config }: assert config.allowUnfree; import ./pkgs.nix system\n")
    expression = EVAL % {"root": ROOT, "stub": stub}
    result = subprocess.run([NIX, "--eval", "--strict", "--json", "-E", expression], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    outputs = json.loads(result.stdout)
    assert outputs["systems"] == ["aarch64-linux", "x86_64-linux"]
    assert {"cmake", "ninja", "git-lfs", "python3-env", "cuda_nvcc", "cuda_cudart"} <= set(outputs["shell"])
    assert outputs["python"] == ["kbuild", "torch", "pytest"]
    assert {"jinja2", "tomlkit", "pyelftools", "huggingface-hub"} <= set(outputs["kbuild"])
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
