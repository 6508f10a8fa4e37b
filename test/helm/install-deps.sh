#!/usr/bin/env bash
# Installs what test/helm/render.go needs from Debian when it is missing: the Go toolchain, sprig
# (Helm's template functions) and the YAML libraries, all built offline in GOPATH mode.
set -euo pipefail
# Test files run side by side and each may call this: the first installs while the others wait
# for the lock, then find the packages installed (apt would refuse a second process outright).
exec 9>"${TMPDIR:-/tmp}/agent-governance-helm-deps.lock"
flock 9
packages=(golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev golang-gopkg-yaml.v3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "test/helm needs these Debian packages: ${missing[*]} (run this script as root)" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
