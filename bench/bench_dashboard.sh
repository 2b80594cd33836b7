#!/usr/bin/env bash
# The dashboard's own cost: CPU (% of one core) and RSS at 1 Hz with the simulator's
# 8 GPUs and 16 disks (gpudisk-top --demo), beside `glances -t 1` in the same run, each
# measured RUNS times for SECONDS by ../shared/tools/measure-overhead.sh (a detached tmux
# pane, 120x40); medians printed.  Then the time to the first frame with data, RUNS times.
#
# With NVITOP_PY (a python with nvitop installed), also the dashboard on this machine's
# disks with 8 stand-in GPUs (bench/gdt_standin.py) whose GPU 0 runs a job of JOB sleeping
# DataLoader-like workers (default 4), beside nvitop --interval 1 on the same stand-in
# GPUs (bench/nvitop_standin.py) and the framework's floor: a minimal Textual app that
# updates one line a second (bench/textual_floor.py, run by PYTHON, which must have
# Textual), so that what is ours is the dashboard less the floor.  With BASE (another
# checkout, e.g. the commit before a change), its `--demo` too (with NVITOP_PY its
# stand-in run as well), interleaved in the same runs.  With IO=1, the
# dashboard on this machine's disks with 8 stand-in GPUs twice, the I/O process view (`i`)
# closed and open (the key is typed into the pane before the measurement starts).
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
run() {  # label command...: prints "label cpu_pct rss_mb" for one run
    local label=$1; shift
    out=$(bash "$measure" "$secs" "$@")
    cpu=${out#cpu_pct=}; cpu=${cpu%% *}; rss=${out##*rss_mb=}
    echo "$label $cpu $rss"
}

nvitop_py=${NVITOP_PY:-}
base=${BASE:-}
py=${PYTHON:-python3}
job=""
if [ -n "$nvitop_py" ] || [ -n "${IO:-}" ]; then
    # the GPU job: a parent and its workers, which the dashboard follows as a training job's
    sh -c "for i in \$(seq ${JOB:-4}); do sleep 100000 & done; wait" &
    job=$!
    trap 'pkill -P "$job" 2>/dev/null; kill "$job" 2>/dev/null' EXIT
    export GDT_BENCH_JOB_PID=$job
fi
results=$( for _ in $(seq "$runs"); do    # each run of each, interleaved
    run gpudisk-top "$gdt" --demo
    if [ -n "$base" ]; then run base "cd $base && PYTHONPATH=$base $py -m gpudisk_top" --demo; fi
    if [ -n "$glances" ]; then run glances "$glances" -t 1; fi
    if [ -n "$nvitop_py" ] || [ -n "${IO:-}" ]; then
        run gdt-standin "$py $here/bench/gdt_standin.py $here"
        if [ -n "$base" ]; then run base-standin "$py $here/bench/gdt_standin.py $base"; fi
    fi
    if [ -n "${IO:-}" ]; then
        # shellcheck disable=SC2016 # TMUX_PANE is the measuring pane's, expanded there
        run gdt-standin-io 'bash -c '"'"'(sleep 3; tmux send-keys -t "$TMUX_PANE" i) & exec '"$py $here/bench/gdt_standin.py $here'"
    fi
    if [ -n "$nvitop_py" ]; then
        run nvitop-standin "$nvitop_py $here/bench/nvitop_standin.py $here --interval 1"
        run textual-floor "$py $here/bench/textual_floor.py"
    fi
done )
echo "$results" | sed 's/^/run: /'
for label in gpudisk-top base glances gdt-standin base-standin gdt-standin-io nvitop-standin textual-floor; do
    cpus=$(echo "$results" | awk -v l=$label '$1==l {print $2}')
    [ -n "$cpus" ] || continue
    rss=$(echo "$results" | awk -v l=$label '$1==l {print $3}' | median)
    printf '%-14s cpu %s%% of a core (median of %s x %s s), rss %s MB\n' "$label" "$(echo "$cpus" | median)" "$runs" "$secs" "$rss"
done
ratio() {  # a b: the ratio of the two labels' median CPU, when both ran
    local a b
    echo "$results" | grep -q "^$1 " && echo "$results" | grep -q "^$2 " || return 0
    a=$(echo "$results" | awk -v l="$1" '$1==l {print $2}' | median)
    b=$(echo "$results" | awk -v l="$2" '$1==l {print $2}' | median)
    awk -v a="$a" -v b="$b" -v x="$1" -v y="$2" \
        'BEGIN {printf "ratio %s / %s: %.2f\n", x, y, (b > 0 ? a / b : 0)}'
}
ratio gpudisk-top glances
ratio gpudisk-top base
ratio gdt-standin nvitop-standin
ratio gdt-standin base-standin
ratio gdt-standin-io gdt-standin
if echo "$results" | grep -q "^textual-floor "; then   # what is ours: above the framework's floor
    a=$(echo "$results" | awk '$1=="gdt-standin" {print $2}' | median)
    b=$(echo "$results" | awk '$1=="textual-floor" {print $2}' | median)
    awk -v a="$a" -v b="$b" 'BEGIN {printf "gdt-standin above the floor: %+.2f%% of a core\n", a - b}'
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
if [ -n "$(printf '%s' "$frames" | grep -v '^$')" ]; then
    printf 'first frame: %s s (median of %s)\n' "$(printf '%s' "$frames" | grep -v '^$' | median)" "$runs"
else
    echo "first frame: n/a (no frame file: GDT must be a command that takes the variable)"
fi
