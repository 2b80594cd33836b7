"""Issue 40: throttling as the share of the interval each reason held, from NVML's
cumulative clock-event durations (nvmlDeviceGetFieldValues), on the stand-in NVML's
field-value API as nvidia-ml-py's; the bit mask where a GPU counts no duration."""

from __future__ import annotations

import dataclasses
import json

import pynvml
import pytest

from gpudisk_top.model.gpu import THROTTLE_DURATIONS, THROTTLE_MASK, gpu_as_json, gpu_views
from gpudisk_top.sim.fake_nvml import FakeGpu, FakeNvml

from gpu_run import Run

T0_US = 1_767_225_600_000_000
POWER = pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP
HW_THERMAL = pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN
SW_THERMAL = pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN
BRAKE = pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN
SYNC = pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST
ALL = (POWER, BRAKE, SW_THERMAL, HW_THERMAL, SYNC)


def test_the_stand_ins_field_values_are_nvidia_ml_pys():
    nvml = FakeNvml(gpus=[FakeGpu(throttle_pct={POWER: 30.0}, unsupported_fields={HW_THERMAL})],
                    start_us=T0_US)
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.advance(2.0)
    values = nvml.nvmlDeviceGetFieldValues(h, [POWER, HW_THERMAL, (SW_THERMAL, 0),
                                               pynvml.NVML_FI_DEV_MEMORY_TEMP])
    assert all(isinstance(v, pynvml.c_nvmlFieldValue_t) for v in values) and len(values) == 4
    assert [v.fieldId for v in values] == [POWER, HW_THERMAL, SW_THERMAL, pynvml.NVML_FI_DEV_MEMORY_TEMP]
    assert [v.nvmlReturn for v in values] == [pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED,
                                              pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED]
    assert values[0].valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    assert values[0].value.ullVal == 600_000_000          # 30% of 2 s, in ns
    assert values[2].value.ullVal == 0 and values[0].timestamp == T0_US + 2_000_000
    nvml.set_state(0, unsupported={"nvmlDeviceGetFieldValues"})
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetFieldValues(h, [POWER])


def test_each_reasons_share_of_the_interval_one_call_a_gpu_a_sample():
    nvml = FakeNvml(gpus=[
        # power cap 30% of the time; hardware thermal from 2.25 s to 2.5 s after the start
        FakeGpu(throttle_pct={POWER: 30.0}, throttle_schedule=[(2.25, 2.5, HW_THERMAL)]),
        # counts no hardware thermal: that reason n/a, the others still come
        FakeGpu(throttle_pct={SW_THERMAL: 50.0}, unsupported_fields={HW_THERMAL}),
        # no field values at all: the bit mask, as before
        FakeGpu(clocks_event_reasons=pynvml.nvmlClocksEventReasonSwPowerCap,
                unsupported={"nvmlDeviceGetFieldValues"}),
    ], start_us=T0_US)
    run = Run(nvml)
    first = gpu_views(run.prev, None, None)[0]
    assert first.throttle_source == THROTTLE_DURATIONS and first.throttle_sw_power_cap_pct is None
    g0, g1, g2 = run.step()
    assert g0.throttle_source == THROTTLE_DURATIONS
    assert g0.throttle_sw_power_cap_pct == pytest.approx(30.0)
    assert g0.throttle_hw_thermal_pct == 0.0 and g0.throttle_reasons == ["sw_power_cap"]
    g0, g1, g2 = run.step()          # 1 s to 2 s ... 2 s to 3 s: the thermal window is in it
    g0, g1, g2 = run.step()
    assert g0.throttle_hw_thermal_pct == pytest.approx(25.0)
    assert g0.throttle_pct == {"sw_power_cap": pytest.approx(30.0), "hw_power_brake": 0.0,
                               "sw_thermal": 0.0, "hw_thermal": pytest.approx(25.0), "sync_boost": 0.0}
    assert g0.throttle_reasons == ["sw_power_cap", "hw_thermal"]
    # the raw bit mask a recording keeps as an integer: the reasons whose count advanced
    assert run.prev.gpus[0].throttle_reasons == (pynvml.nvmlClocksEventReasonSwPowerCap
                                                 | pynvml.nvmlClocksEventReasonHwThermalSlowdown)
    assert g1.throttle_hw_thermal_pct is None and g1.throttle_sw_thermal_pct == pytest.approx(50.0)
    assert (g2.throttle_source, g2.throttle_reasons) == (THROTTLE_MASK, ["sw_power_cap"])
    assert g2.throttle_sw_power_cap_pct is None
    # one field-value call a GPU a sample, for every reason; no bit mask where it counts
    assert nvml.call_count("nvmlDeviceGetFieldValues", 0) == 4
    assert nvml.call_count("nvmlDeviceGetCurrentClocksEventReasons", 0) == 0
    assert nvml.call_count("nvmlDeviceGetCurrentClocksEventReasons", 2) == 4
    assert nvml.call_count("nvmlDeviceGetFieldValues", 2) == 1     # not asked again
    run.collector.close()


def test_a_gpu_that_counts_no_reason_reads_the_bit_mask_from_its_first_sample():
    nvml = FakeNvml(gpus=[FakeGpu(unsupported_fields=set(ALL),
                                  clocks_event_reasons=pynvml.nvmlClocksEventReasonHwThermalSlowdown)],
                    start_us=T0_US)
    run = Run(nvml)
    assert run.prev.gpus[0].throttle_reasons == pynvml.nvmlClocksEventReasonHwThermalSlowdown
    [g] = run.step()
    assert (g.throttle_source, g.throttle_reasons) == (THROTTLE_MASK, ["hw_thermal"])
    # still asked for the energy counter, which it gives: only that id from then on
    assert nvml.call_count("nvmlDeviceGetFieldValues") == 2 and run.prev.gpus[0].energy_mj == 70_000
    assert run.collector._gpus[0].fields.ids == [pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION]
    assert nvml.call_count("nvmlDeviceGetTotalEnergyConsumption") == 0
    run.collector.close()


def test_each_reason_is_its_own_fields_and_energy_comes_in_the_same_call():
    nvml = FakeNvml(gpus=[FakeGpu(throttle_pct={POWER: 10.0, BRAKE: 20.0, SW_THERMAL: 30.0,
                                                HW_THERMAL: 40.0, SYNC: 50.0}, power_mw=300_000),
                          FakeGpu(power_mw=200_000, unsupported_fields={pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION})],
                    start_us=T0_US)
    run = Run(nvml)
    g0, g1 = run.step()
    assert {r: round(v, 6) for r, v in g0.throttle_pct.items()} == {
        "sw_power_cap": 10.0, "hw_power_brake": 20.0, "sw_thermal": 30.0, "hw_thermal": 40.0, "sync_boost": 50.0}
    # the energy counter: from the field values on GPU 0, from its own call where the
    # field is not supported (GPU 1)
    assert [g.energy_mj for g in run.prev.gpus] == [300_000, 200_000]      # 1 s at 300 W, 200 W
    assert nvml.call_count("nvmlDeviceGetTotalEnergyConsumption", 0) == 0
    assert nvml.call_count("nvmlDeviceGetTotalEnergyConsumption", 1) == 2   # from the first read on
    assert nvml.call_count("nvmlDeviceGetFieldValues", 0) == 2
    run.collector.close()


def test_a_counter_that_goes_back_is_na_and_a_share_past_the_interval_is_clipped_and_said():
    nvml = FakeNvml(gpus=[FakeGpu(throttle_pct={POWER: 40.0, SYNC: 10.0})], start_us=T0_US)
    run = Run(nvml)
    run.step()
    run.step()
    # a driver reload: the power counter starts again from 0 (sync boost's goes on)
    nvml.gpus[0].clock_event_ns[POWER] = 0
    [g] = run.step()
    assert g.throttle_sw_power_cap_pct is None and g.throttle_sync_boost_pct == pytest.approx(10.0)
    assert "sw_power_cap counter went back" in g.throttle_note
    [g] = run.step()
    assert g.throttle_sw_power_cap_pct == pytest.approx(40.0) and g.throttle_note is None
    # 1.5 s counted in a 1 s interval
    nvml.gpus[0].clock_event_ns[POWER] += 1_100_000_000
    [g] = run.step()
    assert g.throttle_sw_power_cap_pct == 100.0
    assert g.throttle_note == "sw_power_cap 150.0% of the interval, clipped to 100%"
    doc = gpu_as_json(g)
    assert doc["throttle_source"] == "durations" and doc["throttle_sw_power_cap_pct"] == 100.0
    assert doc["throttle_note"].endswith("clipped to 100%")
    run.collector.close()


def test_a_transient_field_error_is_na_for_that_interval_only():
    nvml = FakeNvml(gpus=[FakeGpu(throttle_pct={POWER: 20.0})], start_us=T0_US)
    run = Run(nvml)
    run.step()
    nvml.set_state(0, errors={"nvmlDeviceGetFieldValues": pynvml.NVMLError_Timeout})
    [g] = run.step()
    assert g.throttle_sw_power_cap_pct is None and g.throttle_source is None
    nvml.set_state(0, errors={})
    [g] = run.step()
    # the interval after spans two seconds of counting: still 20%
    assert g.throttle_source == THROTTLE_DURATIONS
    assert g.throttle_sw_power_cap_pct is None  # its previous sample had no counter
    [g] = run.step()
    assert g.throttle_sw_power_cap_pct == pytest.approx(20.0)
    run.collector.close()


def test_once_shows_each_reasons_share_in_text_and_json():
    from model_factory import gpu, model

    from gpudisk_top.model.select import DeviceFilter
    from gpudisk_top.output.once import render_json, render_text

    m = model(1, gpus=[gpu(0, throttle_source=THROTTLE_DURATIONS, throttle_sw_power_cap_pct=31.5,
                           throttle_hw_thermal_pct=0.0, throttle_reasons=["sw_power_cap"]),
                       gpu(1, throttle_source=THROTTLE_MASK, throttle_reasons=["gpu_idle", "sw_thermal"]),
                       gpu(2, throttle_source=THROTTLE_DURATIONS, throttle_sw_power_cap_pct=0.0)])
    lines = render_text(m, DeviceFilter()).splitlines()
    assert "  GPU 0: clocks held down sw_power_cap 31.5% of the interval" in lines
    assert "  GPU 1: clock event reasons at the read: sw_thermal (no durations on this GPU)" in lines
    assert not any(line.startswith("  GPU 2:") for line in lines)
    doc = json.loads(render_json(m, DeviceFilter()))
    g0, g1, _ = doc["gpus"]
    assert (g0["throttle_source"], g0["throttle_sw_power_cap_pct"], g0["throttle_hw_thermal_pct"],
            g0["throttle_sync_boost_pct"]) == ("durations", 31.5, 0.0, None)
    assert (g1["throttle_source"], g1["throttle_reasons"]) == ("mask", ["gpu_idle", "sw_thermal"])


def test_a_recording_keeps_the_durations_and_old_ones_read_the_mask(tmp_path):
    from recording_helpers import ROOT, sim_samples, write_recording

    from gpudisk_top.record import Recording
    from gpudisk_top.session.replay import Replay
    from gpudisk_top.verdict.step import Stepper

    samples = []
    for i, s in enumerate(sim_samples("demo", 10)):
        g0, *rest = s.gpu.gpus
        g0 = dataclasses.replace(g0, throttle_sw_power_cap_ns=300_000_000 * i, throttle_hw_thermal_ns=None,
                                 throttle_sync_boost_ns=0, throttle_at_us=T0_US + 1_000_000 * i)
        samples.append(dataclasses.replace(s, gpu=dataclasses.replace(s.gpu, gpus=[g0, *rest])))
    want = [Stepper().step(s)[0] for s in samples[:1]]
    assert want[0].gpus[0].throttle_source == THROTTLE_DURATIONS
    for segment in (600, 4):        # rows only; blocks of 4 samples and rows after them
        path = write_recording(tmp_path / f"t{segment}.gdtrec", samples, segment_samples=segment)
        with Recording.open(path) as rec:
            got = [m for m, _ in Replay(rec, warmup_s=None).models()]
        assert len(got) == len(samples)
        for m in got[1:]:
            g0 = m.gpus[0]
            assert g0.throttle_sw_power_cap_pct == pytest.approx(30.0)
            assert (g0.throttle_hw_thermal_pct, g0.throttle_sync_boost_pct) == (None, 0.0)
    # a recording made before the durations: n/a, its GPUs' throttling the bit mask
    with Recording.open(f"{ROOT}/tests/fixtures/recordings/v2-demo-simulated.gdtrec") as rec:
        m = next(iter(m for m, _ in Replay(rec, warmup_s=None).models()))
    assert all(g.throttle_source in (THROTTLE_MASK, None) for g in m.gpus)
    assert all(v is None for g in m.gpus for v in g.throttle_pct.values())


def test_field_value_answers_are_matched_by_id_and_bad_ones_are_na():
    """A driver's answer read member by member (not nvidia-ml-py's packed array), out of
    order, with a value of another type, one that is not a count: each is checked alone."""
    from gpudisk_top.collect.gpu_fields import GpuFields
    from gpudisk_top.collect.sample import GpuRaw

    nvml = FakeNvml(gpus=[FakeGpu(throttle_pct={POWER: 50.0, SYNC: 10.0})], start_us=T0_US)
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    fields = GpuFields(nvml)
    nvml.advance(2.0)
    values = list(nvml.nvmlDeviceGetFieldValues(h, fields.ids))[::-1]     # a list, reversed
    by_id = {v.fieldId: v for v in values}
    by_id[SW_THERMAL].valueType = pynvml.NVML_VALUE_TYPE_DOUBLE           # not a count
    by_id[SW_THERMAL].value.dVal = 1.5
    by_id[BRAKE].nvmlReturn = pynvml.NVML_ERROR_UNKNOWN                   # transient
    raw = GpuRaw(index=0)
    fields.fill(raw, nvml, values)
    assert (raw.throttle_sw_power_cap_ns, raw.throttle_sync_boost_ns) == (1_000_000_000, 200_000_000)
    assert (raw.throttle_sw_thermal_ns, raw.throttle_hw_power_brake_ns) == (None, None)
    assert raw.throttle_hw_thermal_ns == 0 and raw.energy_mj == 140_000
    assert BRAKE in fields.ids and SW_THERMAL in fields.ids      # asked again next time
    fields.fill(raw, nvml, "not an answer")
    assert raw.throttle_sw_power_cap_ns is None and raw.throttle_reasons == 0
