#!/usr/bin/env bash
# Debian packages the full test suite uses, installed with apt when missing:
#   clang-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs  ROCm device-only compiles (gfx942)
#   git-lfs                                           local hub folders track binaries with LFS
#   nix-bin                                           flake.nix parse/evaluation checks
# With arguments, only those packages (scripts/main.sh: git-lfs).
set -euo pipefail
packages=(clang-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs git-lfs nix-bin)
[ $# -eq 0 ] || packages=("$@")
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "system-packages: no apt-get; install ${missing[*]} by hand (tests that need them skip)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo -n"
echo "system-packages: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
