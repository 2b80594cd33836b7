#!/usr/bin/env bash
# Build an iostat from sysstat >= 12.7.3 and print its path, for the half of
# tests/test_iostat_reference.py that Debian bookworm's package (12.6.1) cannot give:
# 12.7.3 and later print 0 where a counter went down; 12.6.1 wraps.
#
#   usage: tests/newer_iostat.sh DIR      (as root; needs apt sources, gcc, make, xz)
#   then:  export GPUDISK_TOP_IOSTAT_12_7="$(tests/newer_iostat.sh /tmp/gdt-sysstat)"
#
# The source is Debian trixie's sysstat source package (12.7.5), fetched through apt from
# a deb-src line added for it; nothing of trixie is installed, only iostat is built, in
# DIR. Exits non-zero, saying why on stderr, when it cannot.
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
cd "$dir"
if [ ! -x sysstat/iostat ]; then
    list=/etc/apt/sources.list.d/gpudisk-top-trixie-src.list
    echo "deb-src http://deb.debian.org/debian trixie main" > "$list"
    apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >/dev/null
    # the orig tarball is what is built; the .dsc is not needed (and apt may fail on it)
    apt-get source --download-only -qq sysstat/trixie >/dev/null 2>&1 || true
    rm -f "$list"
    tarball=$(ls sysstat_12.7.*.orig.tar.* 2>/dev/null | head -1 || true)
    [ -n "$tarball" ] || { echo "newer_iostat: no sysstat 12.7 source from apt" >&2; exit 1; }
    rm -rf sysstat && mkdir sysstat
    tar xf "$tarball" -C sysstat --strip-components=1
    (cd sysstat && ./configure --disable-nls --disable-sensors && make -j"$(nproc)" iostat) \
        >build.log 2>&1 \
        || { tail -5 build.log >&2; echo "newer_iostat: building iostat failed" >&2; exit 1; }
fi
"$dir/sysstat/iostat" -V >/dev/null 2>&1 \
    || { echo "newer_iostat: $dir/sysstat/iostat does not run" >&2; exit 1; }
echo "$dir/sysstat/iostat"
