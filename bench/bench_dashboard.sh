#!/usr/bin/env bash
# The dashboard's own cost: CPU (% of one core) and RSS at 1 Hz with the simulator's
# 8 GPUs and 16 disks (gpudisk-top --demo), beside `glances -t 1` in the same run, each
# measured RUNS times for SECONDS by ../shared/tools/measure-overhead.sh (a detached tmux
# pane, 120x40); medians printed.  Then the time to the first frame with data, RUNS times.
#
# usage: bench/bench_dashboard.sh [SECONDS=60] [RUNS=3]
# needs: tmux; gpudisk-top on PATH (or GDT=...); glances on PATH (or GLANCES=...)
set -euo pipefail
secs=${1:-60}
runs=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
measure=${MEASURE:-$here/../shared/tools/measure-overhead.sh}
gdt=${GDT:-$(command -v gpudisk-top)}
glances=${GLANCES:-$(command -v glances || true)}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run() {  # label command...: prints "label cpu_pct rss_mb" per run
    local label=$1; shift
    for _ in $(seq "$runs"); do
        out=$(bash "$measure" "$secs" "$@")
        cpu=${out#cpu_pct=}; cpu=${cpu%% *}; rss=${out##*rss_mb=}
        echo "$label $cpu $rss"
    done
}

results=$( { run gpudisk-top "$gdt" --demo; [ -n "$glances" ] && run glances "$glances" -t 1; } )
echo "$results" | sed 's/^/run: /'
for label in gpudisk-top glances; do
    cpus=$(echo "$results" | awk -v l=$label '$1==l {print $2}')
    [ -n "$cpus" ] || continue
    rss=$(echo "$results" | awk -v l=$label '$1==l {print $3}' | median)
    printf '%-12s cpu %s%% of a core (median of %s x %s s), rss %s MB\n' "$label" "$(echo "$cpus" | median)" "$runs" "$secs" "$rss"
done
if [ -n "$glances" ]; then
    awk -v a="$(echo "$results" | awk '$1=="gpudisk-top" {print $2}' | median)" \
        -v b="$(echo "$results" | awk '$1=="glances" {print $2}' | median)" \
        'BEGIN {printf "ratio gpudisk-top / glances: %.2f\n", a / b}'
fi

# first frame: seconds from launching it (tmux included) to its first painted frame with data
frames=""
for _ in $(seq "$runs"); do
    f=$(mktemp); rm -f "$f"
    launched=$(date +%s.%N)
    tmux new-session -d -s gdtff$$ -x 120 -y 40 "GPUDISK_TOP_FIRST_FRAME_FILE=$f $gdt --demo"
    for _ in $(seq 100); do [ -s "$f" ] && break; sleep 0.05; done
    tmux kill-session -t gdtff$$ 2>/dev/null || true
    if [ -s "$f" ]; then
        frames="$frames$(awk -v a="$launched" '{printf "%.3f", $1 - a}' "$f")"$'\n'
    fi
    rm -f "$f"
done
printf 'first frame: %s s (median of %s)\n' "$(printf '%s' "$frames" | grep -v '^$' | median)" "$runs"
