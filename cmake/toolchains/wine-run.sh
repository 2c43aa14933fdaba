#!/bin/sh
# CMAKE_CROSSCOMPILING_EMULATOR of the Windows presets (cmake/toolchains/mingw-w64.cmake):
#   wine-run.sh PREFIX PROGRAM.exe ARGS...
# runs PROGRAM under wine64 in its own prefix PREFIX (a folder of the build tree), created quietly
# on first use. When wine cannot start, it says so loudly on stderr and exits 77, which the
# Windows presets' tests take as SKIP (never as a pass).
prefix=$1
shift
export WINEPREFIX="$prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" DISPLAY=
wine=$(command -v wine64 || command -v wine || echo /usr/lib/wine/wine64)
skip() {
  echo "SKIP (wine): $1 -- the Windows build was NOT tested (apt-get install wine64)" >&2
  exit 77
}
[ -x "$wine" ] || skip "wine64 is not installed"
if [ ! -f "$prefix/.krafla-ready" ]; then
  mkdir -p "$prefix" || skip "cannot create the wine prefix $prefix"
  # One initialisation even when ctest runs several tests at once.
  (
    flock 9
    if [ ! -f "$prefix/.krafla-ready" ]; then
      "$wine" wineboot --init >"$prefix/.init.log" 2>&1 && "${wine%64}server" -w 2>/dev/null
      "$wine" cmd /c exit 0 >>"$prefix/.init.log" 2>&1 && touch "$prefix/.krafla-ready"
    fi
  ) 9>"$prefix/.lock"
  [ -f "$prefix/.krafla-ready" ] || skip "wine cannot start in $prefix (see $prefix/.init.log)"
fi
exec "$wine" "$@"
