#!/usr/bin/env bash
# Benchmark: median time of `install --from ARCHIVE --sha256 HEX --no-service`
# into a fresh HOME, smoke test excluded, next to the floor for the same
# archive on the same disk: `sha256sum -c` + `tar xzf` + `sync` + `mv`.
#
#   release/bench/install-from.sh [RUNS]      (default 9 runs each)
#
# Uses target/release/{lapis-ai-controller,lapis-release} (built if missing).
# The smoke test's own duration is reported by the installer in
# `timings.smokeMs` of `install --json` and subtracted from the wall time;
# the smoke median is printed separately.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-9}"

unset SOURCE_DATE_EPOCH LAPIS_BUILD_COMMIT LAPIS_BUILD_VERSION
if [ ! -x target/release/lapis-ai-controller ] || [ ! -x target/release/lapis-release ]; then
  cargo build --release --locked -p lapis-ai-controller -p lapis-release
fi
bin="$PWD/target/release/lapis-ai-controller"
target="$("$bin" version --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["build"]["target"])')"

work="$(mktemp -d "${TMPDIR:-/tmp}/lapis-bench-XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/dist"
target/release/lapis-release build --binary "$bin" --target "$target" --out "$work/dist" --commit dev >/dev/null
archive="$(ls "$work"/dist/*.tar.gz)"
sha="$(sha256sum "$archive" | cut -d' ' -f1)"
size="$(stat -c %s "$archive" 2>/dev/null || stat -f %z "$archive")"

# Milliseconds from GNU date (cheap); python3 where date lacks %N (macOS).
if [ "$(date +%N)" != "N" ] && [ -n "$(date +%N)" ]; then
  now_ms() { date +%s%N | awk '{ printf "%.3f\n", $1 / 1e6 }'; }
else
  now_ms() { python3 -c 'import time; print(time.time() * 1e3)'; }
fi

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

install_times=() smoke_times=() floor_times=()
for i in $(seq "$runs"); do
  home="$work/home-$i"
  mkdir -p "$home/.config"
  sync
  start="$(now_ms)"
  doc="$(HOME="$home" XDG_CONFIG_HOME="$home/.config" "$bin" install --from "$archive" --sha256 "$sha" --no-service --json)"
  end="$(now_ms)"
  smoke="$(printf '%s' "$doc" | python3 -c 'import json,sys; print(json.load(sys.stdin)["timings"]["smokeMs"])')"
  install_times+=("$(awk -v a="$start" -v b="$end" -v s="$smoke" 'BEGIN { printf "%.2f", b - a - s }')")
  smoke_times+=("$smoke")

  floor="$work/floor-$i"
  mkdir -p "$floor/releases"
  sync
  start="$(now_ms)"
  (
    cd "$work/dist" && sha256sum -c --quiet SHA256SUMS
    mkdir "$floor/releases/.staging"
    tar xzf "$archive" -C "$floor/releases/.staging"
    sync
    mv "$floor/releases/.staging" "$floor/releases/snapshot"
  )
  end="$(now_ms)"
  floor_times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')")
  rm -rf "$home" "$floor"
done

install_med="$(printf '%s\n' "${install_times[@]}" | median)"
smoke_med="$(printf '%s\n' "${smoke_times[@]}" | median)"
floor_med="$(printf '%s\n' "${floor_times[@]}" | median)"
ratio="$(python3 -c "print(round($install_med / $floor_med, 2))")"
echo "archive: $(basename "$archive") ($size bytes), $runs runs each"
echo "install --from (smoke excluded): median ${install_med} ms   runs: ${install_times[*]}"
echo "floor (sha256sum -c + tar xzf + sync + mv): median ${floor_med} ms   runs: ${floor_times[*]}"
echo "smoke test (reported by the installer): median ${smoke_med} ms"
echo "ratio install/floor: ${ratio}x (goal <= 1.5x)"
