#!/bin/sh
# Install lapis-ai-controller from a published GitHub release:
#
#   curl -fsSL https://github.com/lapis-ai/lapis-ai-controller/releases/latest/download/install.sh | sh
#   curl -fsSL .../install.sh | sh -s -- --version 0.2.0 --no-service
#   curl -fsSL .../install.sh | sh -s -- --quiet --instance work --install-path ~/bin/lapis
#
# Detects the OS, CPU and C library, downloads the matching
# lapis-ai-controller-<version>-<target>.tar.gz and SHA256SUMS of the pinned
# (--version) or the latest release, checks the archive against SHA256SUMS
# with sha256sum or `shasum -a 256` (and refuses to go on without either),
# then hands both files to the archive's own binary:
# `install --from ARCHIVE --checksums SHA256SUMS`, which verifies them again
# and installs through the same staged, smoke-tested path as every install.
#
# POSIX sh (runs under dash and busybox ash); needs curl or wget, tar, and
# sha256sum or shasum. Nothing is installed unless every check passed.
set -eu

REPO_URL="https://github.com/lapis-ai/lapis-ai-controller/releases"
PRODUCT="lapis-ai-controller"
# Oldest glibc the *-linux-gnu archives run on (checked by `lapis-release
# build`); older or unknown C libraries get the static musl archive.
GLIBC_FLOOR="2.35"

usage() {
  cat <<EOF
usage: install.sh [--version V] [--no-service] [--instance NAME]
                  [--install-path PATH] [--quiet] [--base-url URL]
                  [--target TRIPLE]

  (every option that takes a value also takes it as --option=VALUE)

  --version V      install release V (default: the latest release)
  --no-service     do not register or start the user service
  --instance NAME  install an isolated instance NAME (its own config,
                   controller home, socket and service unit)
  --install-path PATH
                   launcher path (default: ~/.local/bin/lapis-ai-controller)
  --quiet          print nothing but warnings and errors
  --base-url URL   releases base URL, for mirrors and tests
                   (default: \$LAPIS_AI_CONTROLLER_INSTALL_URL, else
                   $REPO_URL); assets are read from
                   URL/download/vV/NAME and URL/latest/download/SHA256SUMS
  --target TRIPLE  archive target instead of the detected one
EOF
}

quiet=""
# Progress, silenced by --quiet; warn() and die() always print.
say() { [ -n "$quiet" ] || printf 'install.sh: %s\n' "$*" >&2; }
warn() { printf 'install.sh: %s\n' "$*" >&2; }
die() {
  warn "error: $*"
  exit 1
}

# Everything runs from main, called on the last line: a download cut short
# (curl ... | sh) defines nothing runnable instead of running half a script.
main() {
  version=""
  no_service=""
  instance=""
  install_path=""
  target=""
  base="${LAPIS_AI_CONTROLLER_INSTALL_URL:-$REPO_URL}"

  # An option that takes a value takes it as the next argument or after
  # `=`: `--opt=V` is split into `--opt V` first, so each option is handled
  # once. `take` checks the value is there.
  take() { [ "$#" -ge 2 ] || die "$1 needs a value"; }
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --version=* | --instance=* | --install-path=* | --base-url=* | --target=*)
        opt="${1%%=*}"
        value="${1#*=}"
        shift
        set -- "$opt" "$value" "$@"
        ;;
    esac
    case "$1" in
      --version)
        take "$@"
        version="${2#v}"
        shift 2
        ;;
      --instance)
        take "$@"
        instance="$2"
        shift 2
        ;;
      --install-path)
        take "$@"
        install_path="$2"
        shift 2
        ;;
      --base-url)
        take "$@"
        base="$2"
        shift 2
        ;;
      --target)
        take "$@"
        target="$2"
        shift 2
        ;;
      --no-service)
        no_service=1
        shift
        ;;
      --quiet | -q)
        quiet=1
        shift
        ;;
      -h | --help)
        usage
        exit 0
        ;;
      *)
        usage >&2
        die "unknown argument: $1"
        ;;
    esac
  done

  base="${base%/}"
  # https only; plain http only to this machine (tests, local mirrors).
  case "$base" in
    https://*) ;;
    http://127.0.0.1:* | http://127.0.0.1/* | http://localhost:* | http://localhost/* | http://\[::1\]:*) ;;
    *) die "refusing base URL $base: only https:// (or http:// on loopback)" ;;
  esac
  case "$version" in
    *[!0-9A-Za-z.+-]* | .*) die "invalid version: $version" ;;
  esac

  # --- detection -----------------------------------------------------------

  # Prints the running glibc's version ("2.36"), or nothing.
  glibc_version() {
    v="$(getconf GNU_LIBC_VERSION 2>/dev/null || true)"
    case "$v" in
      glibc\ *) v="${v#glibc }" ;;
      *) v="$(ldd --version 2>&1 | sed -n '1s/.*[ )]\([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p')" ;;
    esac
    case "$v" in
      [0-9]*.[0-9]*) printf '%s\n' "$v" ;;
    esac
  }

  # Succeeds when glibc version $1 ("2.36") is at least GLIBC_FLOOR.
  glibc_at_least_floor() {
    major="${1%%.*}"
    minor="$(printf '%s' "${1#*.}" | sed 's/[^0-9].*//')"
    floor_major="${GLIBC_FLOOR%%.*}"
    floor_minor="${GLIBC_FLOOR#*.}"
    [ -n "$minor" ] || return 1
    [ "$major" -gt "$floor_major" ] || { [ "$major" -eq "$floor_major" ] && [ "$minor" -ge "$floor_minor" ]; }
  }

  detect_target() {
    os="$(uname -s)"
    arch="$(uname -m)"
    case "$arch" in
      x86_64 | amd64) arch=x86_64 ;;
      aarch64 | arm64) arch=aarch64 ;;
      *) die "unsupported CPU architecture: $arch" ;;
    esac
    case "$os" in
      Linux)
        # glibc at or above the floor gets the gnu build; musl, an older glibc
        # or anything unrecognised gets the statically linked musl build.
        libc=musl
        gv="$(glibc_version)"
        if [ -n "$gv" ] && glibc_at_least_floor "$gv"; then
          libc=gnu
        fi
        printf '%s-unknown-linux-%s\n' "$arch" "$libc"
        ;;
      Darwin)
        # An x86_64 shell under Rosetta on Apple silicon still gets the native build.
        if [ "$arch" = x86_64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || echo 0)" = 1 ]; then
          arch=aarch64
        fi
        printf '%s-apple-darwin\n' "$arch"
        ;;
      *) die "unsupported operating system: $os" ;;
    esac
  }

  # --- tools -----------------------------------------------------------------

  if command -v curl >/dev/null 2>&1; then
    fetch() {
      case "$1" in
        https://*) curl --proto '=https' --tlsv1.2 -fsSL --retry 3 -o "$2" "$1" ;;
        *) curl -fsSL --retry 3 -o "$2" "$1" ;;
      esac
    }
  elif command -v wget >/dev/null 2>&1; then
    fetch() { wget -q -O "$2" "$1"; }
  else
    die "curl or wget is required"
  fi

  if command -v sha256sum >/dev/null 2>&1; then
    sha256_of() { sha256sum "$1" | cut -d ' ' -f 1; }
  elif command -v shasum >/dev/null 2>&1; then
    sha256_of() { shasum -a 256 "$1" | cut -d ' ' -f 1; }
  else
    die "sha256sum or shasum is required to verify the download; nothing was installed"
  fi

  command -v tar >/dev/null 2>&1 || die "tar is required"

  # Prints the hex listed for file name $1 in SHA256SUMS $2 (exactly one line
  # "<64 hex>  <name>" or "<64 hex> *<name>"), or fails.
  listed_sha256() {
    awk -v name="$1" '
      { n = $2; sub(/^\*/, "", n) }
      n == name && NF == 2 && $1 ~ /^[0-9a-fA-F]+$/ && length($1) == 64 { print tolower($1); count++ }
      END { exit count == 1 ? 0 : 1 }
    ' "$2"
  }

  # --- download and verify ----------------------------------------------------

  [ -n "$target" ] || target="$(detect_target)"
  case "$target" in
    *[!0-9A-Za-z._-]*) die "invalid target: $target" ;;
  esac

  tmp="$(mktemp -d 2>/dev/null || mktemp -d -t lapis-install)"
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM
  sums="$tmp/SHA256SUMS"

  if [ -z "$version" ]; then
    say "finding the latest release for $target"
    fetch "$base/latest/download/SHA256SUMS" "$sums" || die "cannot download $base/latest/download/SHA256SUMS"
    # The archive's name in the latest SHA256SUMS carries its version.
    name="$(awk -v pre="$PRODUCT-" -v suf="-$target.tar.gz" '
      { n = $2; sub(/^\*/, "", n) }
      index(n, pre) == 1 && length(n) > length(pre suf) && substr(n, length(n) - length(suf) + 1) == suf { print n }
    ' "$sums")"
    [ -n "$name" ] && [ "$(printf '%s\n' "$name" | wc -l)" -eq 1 ] \
      || die "the latest release lists no single archive for $target; nothing was installed"
    version="${name#"$PRODUCT-"}"
    version="${version%"-$target.tar.gz"}"
    case "$version" in
      *[!0-9A-Za-z.+-]* | .* | "") die "invalid version in SHA256SUMS: $version" ;;
    esac
  else
    fetch "$base/download/v$version/SHA256SUMS" "$sums" || die "cannot download SHA256SUMS of v$version"
  fi

  name="$PRODUCT-$version-$target.tar.gz"
  archive="$tmp/$name"
  say "downloading $name"
  fetch "$base/download/v$version/$name" "$archive" || die "cannot download $base/download/v$version/$name"

  expected="$(listed_sha256 "$name" "$sums")" \
    || die "SHA256SUMS has no (single) line for $name; nothing was installed"
  actual="$(sha256_of "$archive" | tr 'A-F' 'a-f')"
  [ "$actual" = "$expected" ] \
    || die "checksum mismatch for $name (expected $expected, got $actual); nothing was installed"
  say "verified $name (sha256 $actual)"

  # --- install with the archive's own binary ----------------------------------

  mkdir "$tmp/x"
  tar -xzf "$archive" -C "$tmp/x" "bin/$PRODUCT" || die "cannot extract bin/$PRODUCT from $name"
  set -- install --from "$archive" --checksums "$sums"
  [ -z "$no_service" ] || set -- "$@" --no-service
  # The installer checks both values itself (an instance name's rules,
  # a launcher path it did not create).
  [ -z "$instance" ] || set -- "$@" --instance "$instance"
  [ -z "$install_path" ] || set -- "$@" --install-path "$install_path"
  # stdin is the script itself under `curl ... | sh`: give the installer none.
  rc=0
  if [ -n "$quiet" ]; then
    # Its report goes; its warnings and errors (stderr) stay.
    "$tmp/x/bin/$PRODUCT" "$@" </dev/null >/dev/null || rc=$?
  else
    "$tmp/x/bin/$PRODUCT" "$@" </dev/null || rc=$?
  fi
  start="$PRODUCT serve --background"
  [ -z "$instance" ] || start="$start --instance $instance"
  case "$rc" in
    0) ;;
    # Installed, but no service manager answered: not a failure of the
    # install. Pass the exit class through with what to do.
    3)
      warn "installed; no service manager answered, so the controller is not running yet"
      warn "start it with: $start   (or the serve command printed above)"
      exit 3
      ;;
    *) die "$PRODUCT install failed (exit $rc)" ;;
  esac
}

main "$@"
