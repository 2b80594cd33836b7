"""gpudisk-top's real command line with 8 stand-in GPUs (tests/standin.py: the project's
NVML fake where `import pynvml` finds it, every GPU at 95 %), for bench/bench_dashboard.sh
to set beside nvitop on the same fake (bench/nvitop_standin.py).  With GDT_BENCH_JOB_PID
(bench/bench_dashboard.sh's job), that process is GPU 0's compute process: the dashboard
follows it and its workers as a training job's.

usage: python bench/gdt_standin.py CHECKOUT [gpudisk-top arguments]
"""
import os
import sys

checkout = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import standin  # noqa: E402

job = os.environ.get("GDT_BENCH_JOB_PID")
cmd, env = standin.command(sys.argv[2:], gpus=8, util_pct=95.0,
                           processes={0: [int(job)]} if job else None)
env["PYTHONPATH"] = checkout
os.chdir(checkout)
os.execve(cmd[0], cmd, env)
