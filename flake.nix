{
  description = "kbuild: build, check, test and publish PyTorch kernels for the Kernel Hub";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems =
        f:
        nixpkgs.lib.genAttrs systems (
          system:
          f system (
            import nixpkgs {
              inherit system;
              # The CUDA toolkit is unfree.
              config.allowUnfree = true;
            }
          )
        );

      kbuildFor =
        ps:
        ps.buildPythonPackage {
          pname = "kbuild";
          version = "0.1.0";
          pyproject = true;
          src = self;
          build-system = [ ps.setuptools ];
          # pyproject.toml's dependencies (tooling/tests/test_flake.py keeps them equal);
          # cmake and ninja come from nixpkgs in the shell and the app, not as wheels.
          dependencies = [
            ps.jinja2
            ps.tomlkit
            ps.packaging
            ps.pyyaml
            ps.pyelftools
            ps.huggingface-hub
            ps.filelock
            ps.pytest
            ps.kernels
            ps.markdown-it-py
            ps.argcomplete
          ];
          # The tests build kernels and load them with `kernels`: run them in the dev shell.
          doCheck = false;
        };

      # Python with kbuild, torch and pytest: what `kbuild build` and `kbuild test` need.
      pythonFor = pkgs: pkgs.python3.withPackages (ps: [
        (kbuildFor ps)
        ps.torch
        ps.pytest
      ]);

      cudaFor = pkgs: pkgs.cudaPackages_13_0;
    in
    {
      packages = forAllSystems (
        system: pkgs: {
          kbuild = pkgs.python3Packages.toPythonApplication (kbuildFor pkgs.python3Packages);
          default = self.packages.${system}.kbuild;
        }
      );

      devShells = forAllSystems (_system: pkgs: {
        default = pkgs.mkShell {
          packages = [
            pkgs.cmake
            pkgs.ninja
            pkgs.git
            pkgs.git-lfs
            (pythonFor pkgs)
            (cudaFor pkgs).cuda_nvcc
            (cudaFor pkgs).cuda_cudart
            (cudaFor pkgs).cuda_cccl
          ];
          CUDA_HOME = "${(cudaFor pkgs).cuda_nvcc}";
          # Work on the checkout's kbuild rather than the packaged copy.
          shellHook = ''
            export PYTHONPATH="$PWD/tooling''${PYTHONPATH:+:$PYTHONPATH}"
          '';
        };
      });

      # `nix run .#build -- kernels/relu`: build a kernel for this environment's variant.
      apps = forAllSystems (
        system: pkgs:
        let
          build = pkgs.writeShellApplication {
            name = "kbuild-build";
            runtimeInputs = [
              pkgs.cmake
              pkgs.ninja
              pkgs.git
              (pythonFor pkgs)
            ];
            text = ''exec kbuild build "$@"'';
          };
        in
        {
          build = {
            type = "app";
            program = "${build}/bin/kbuild-build";
          };
          default = self.apps.${system}.build;
        }
      );
    };
}
