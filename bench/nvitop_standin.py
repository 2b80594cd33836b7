"""nvitop on gpudisk-top's stand-in GPUs, the peer of bench/bench_dashboard.sh.

The project's NVML fake (8 GPUs at 95 %) answers every NVML call it implements;
nvidia-ml-py's own module gives the rest (constants, structures, error classes; a call
the fake lacks reaches the absent driver, and nvitop shows N/A: memory and temperature).

usage: PYTHON_WITH_NVITOP bench/nvitop_standin.py CHECKOUT [nvitop options]
"""
import sys
import threading
import time
import types

sys.path.insert(0, sys.argv[1])            # the gpudisk-top checkout, for its fake
import pynvml as real  # noqa: E402  (nvidia-ml-py, beside nvitop)
from gpudisk_top.sim.fake_nvml import FakeNvml  # noqa: E402

nvml = FakeNvml.with_gpus(8)
for i in range(8):
    nvml.set_state(i, util_pct=95.0, mem_util_pct=40.0, power_mw=550_000,
                   power_limit_mw=700_000, processes=[])

shim = types.ModuleType("pynvml")
shim.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})


def _wrap(method):
    """A plain function (nvitop lists the module's functions by type)."""
    def call(*args, **kwargs):
        return method(*args, **kwargs)
    call.__name__ = method.__name__
    return call


for name in dir(type(nvml)):
    if name.startswith("nvml") and name[4:5].isupper() and callable(getattr(nvml, name)):
        shim.__dict__[name] = _wrap(getattr(nvml, name))
sys.modules["pynvml"] = shim


def tick():
    while True:
        nvml.advance_to(time.time())
        time.sleep(0.5)


threading.Thread(target=tick, daemon=True).start()
from nvitop.cli import main  # noqa: E402

sys.argv = ["nvitop"] + sys.argv[2:]
sys.exit(main())
