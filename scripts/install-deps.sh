#!/usr/bin/env bash
# Installs every build, test and demo dependency from Debian packages. Idempotent:
# packages already present are skipped, so a second run costs one dpkg query.
set -euo pipefail

packages=(
  # build
  cmake make g++ clang llvm pkg-config libclang-rt-14-dev
  libbpf-dev bpftool libelf-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev libmnl-dev
  libssl-dev libyaml-cpp-dev libcrypt-dev  # the exporter: TLS, --web-config, bcrypt
  googletest libgtest-dev libgmock-dev libcpp-httplib-dev
  # tests and demo on this host (curl, openssl: the exporter's TLS tests; systemd: systemd-analyze;
  # systemd-container: packaging/check-units.sh)
  iproute2 iperf3 iputils-ping ethtool curl openssl systemd systemd-container
  lintian  # packaging/check-deb.sh
  # the stock-kernel VM harness
  qemu-system-x86 busybox-static cpio kmod zstd xz-utils
  # benchmarks
  gnuplot-nox jq python3-jsonschema python3-yaml
  stress-ng  # scripts/test.sh --busy: one core kept busy, as on a loaded machine
  containernetworking-plugins  # bench/cni.sh: the reference bridge + host-local + bandwidth plugins
  podman containerd crun  # tests/cni/runtime-test.sh: real runtimes starting containers through shaperctl-cni
)


missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
