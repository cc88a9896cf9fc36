#!/usr/bin/env bash
# Builds the Sluice container image FROM scratch out of files this machine
# already has, so no registry is needed:
#
#   packaging/container/build-image.sh BINARY TAG [TAG...]
#
#   BINARY  the sluice binary to ship (make image: the Release build's)
#   TAG     image names, e.g. sluice:0.1.0 sluice:latest
#
# The image holds the binary (stripped), exactly the shared libraries `ldd`
# names for it and the dynamic loader, the CA certificates (for rediss://),
# /etc/passwd and /etc/group naming the user it runs as (sluice, 65532), an
# nsswitch.conf, and the default config (sluice.yaml beside this script) at
# /etc/sluice/sluice.yaml. No shell, no package manager.
#
# The engine is podman or docker, whichever answers `info` (a docker client
# without a daemon does not); SLUICE_CONTAINER_ENGINE=podman|docker picks one.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
if (($# < 2)); then
  echo "usage: $0 BINARY TAG [TAG...]" >&2
  exit 2
fi
binary="$1"
shift
if [[ ! -x "$binary" ]]; then
  echo "build-image: $binary is not an executable (make build makes build/sluice)" >&2
  exit 1
fi

engine="${SLUICE_CONTAINER_ENGINE:-}"
if [[ -z "$engine" ]]; then
  for candidate in podman docker; do
    if command -v "$candidate" >/dev/null && "$candidate" info >/dev/null 2>&1; then
      engine="$candidate"
      break
    fi
  done
fi
if [[ -z "$engine" ]]; then
  echo "build-image: neither podman nor docker can build here (\`podman info\` and" \
    "\`docker info\` failed); install podman (scripts/install-deps.sh) or start dockerd" >&2
  exit 1
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/rootfs"
mkdir -p "$root/usr/bin" "$root/etc/sluice" "$root/etc/ssl/certs"

# A file copied to the same path in the image, symlinks resolved (the image
# needs the content under the name the loader asks for).
copy_in() {
  mkdir -p "$root$(dirname "$1")"
  cp -L "$1" "$root$1"
}

if command -v strip >/dev/null; then
  strip --strip-unneeded -o "$root/usr/bin/sluice" "$binary"
else
  cp "$binary" "$root/usr/bin/sluice"
fi
chmod 0755 "$root/usr/bin/sluice"

# `ldd` lines: "libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x...)" and
# the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
libraries=$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
if grep -q "not found" <(ldd "$binary"); then
  echo "build-image: ldd cannot find every library of $binary:" >&2
  ldd "$binary" >&2
  exit 1
fi
for library in $libraries; do copy_in "$library"; done

ca_bundle=/etc/ssl/certs/ca-certificates.crt
if [[ ! -r "$ca_bundle" ]]; then
  echo "build-image: $ca_bundle is missing (apt-get install ca-certificates)" >&2
  exit 1
fi
cp -L "$ca_bundle" "$root$ca_bundle"
# Where Debian's OpenSSL looks by default (OPENSSLDIR /usr/lib/ssl), as on Debian.
mkdir -p "$root/usr/lib/ssl"
ln -s "$ca_bundle" "$root/usr/lib/ssl/cert.pem"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
sluice:x:65532:65532:Sluice rate limiter:/nonexistent:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
sluice:x:65532:
EOF
# Host names (a Redis address, an upstream) are looked up in /etc/hosts, then
# DNS; glibc has both built in.
echo "hosts: files dns" >"$root/etc/nsswitch.conf"
install -m 0644 "$here/sluice.yaml" "$root/etc/sluice/sluice.yaml"
# The Grafana dashboard and Prometheus alert rules, where the .deb puts them.
install -D -m 0644 "$here/../../deploy/grafana/sluice.json" "$root/usr/share/sluice/grafana/sluice.json"
install -D -m 0644 "$here/../../deploy/prometheus/alerts.yaml" \
  "$root/usr/share/sluice/prometheus/alerts.yaml"

version=$("$binary" --version | awk '{print $2}')
cp "$here/Containerfile" "$stage/Containerfile"
tag_args=()
for tag in "$@"; do tag_args+=(-t "$tag"); done
"$engine" build --quiet --build-arg "VERSION=$version" -f "$stage/Containerfile" \
  "${tag_args[@]}" "$stage" >/dev/null
size=$("$engine" image inspect --format '{{.Size}}' "$1")
echo "build-image: built $* with $engine ($((size / 1000000)) MB, sluice $version)"
