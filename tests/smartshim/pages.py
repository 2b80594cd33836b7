"""A real drive's numbers, from its `smartctl --json` fixture (tests/fixtures/health/),
re-encoded as the raw pages the drive sent smartctl: NVMe Identify Controller and
Namespace, the SMART / Health Information log (LID 02h) and the Error Information log
(LID 01h); ATA IDENTIFY DEVICE, SMART READ DATA, SMART READ THRESHOLDS, the SMART log
directory, the SMART error log (01h), self-test log (06h), selective self-test log (09h)
and the SMART RETURN STATUS verdict.  tests/smartshim/smartshim.c answers smartctl's
ioctls from them, so the real smartctl prints text and JSON of the same data.

Layouts: the NVMe base specification (Identify Controller, Identify Namespace, SMART /
Health Information, Error Information), ATA8-ACS / ACS-3 (IDENTIFY DEVICE words, SMART
READ DATA, thresholds, log directory, error log, self-test logs), as smartmontools
7.3 reads them (nvmecmds.h, atacmds.h structs; ataprint.cpp, nvmeprint.cpp).

What a fixture does not say is not invented as the drive's: a field the fixture has no
value for is zero, which the standards define as "not reported" (NVMe version, power
states, vendor IDs where absent), or a feature the drive is encoded as not having (ATA
SCT, General Purpose Logging, device statistics; a 7.3 fixture's self-test logs, which
`--log=error` did not read).  The exceptions are in STAND_INS: the NVMe composite
temperature thresholds (WCTEMP/CCTEMP), which smartctl before 7.5 prints only as text, so
no JSON fixture has them; each drive gets a stated stand-in value.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "health"

# fixture -> the smartctl -d type its pages answer (smartshim.c: nvme, or ata over the
# HDIO ioctls)
DRIVES = {
    "nvme-7.0-media-errors.json": "nvme",
    "nvme-7.1-healthy.json": "nvme",
    "nvme-7.3-error-log.json": "nvme",
    "nvme-7.3-critical-warning.json": "nvme",
    "hdd-7.1-failing.json": "ata",
    "hdd-7.3-reallocated.json": "ata",
    "hdd-7.3.json": "ata",
    "sata-ssd-7.3.json": "ata",
}

# Not in any fixture (smartctl < 7.5 writes WCTEMP/CCTEMP to text only): stand-ins, in
# degrees Celsius, distinct so a swap of the two would show.  Not the drives' own values.
STAND_INS = {
    "nvme_warning_temp_c": 75,
    "nvme_critical_temp_c": 85,
    "nvme_error_log_entries_max": 64,     # ELPE + 1: how many entries the drive keeps
}

KELVIN = 273   # smartctl prints K - 273 (nvmeprint.cpp kelvin_to_str)


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


# ---------------------------------------------------------------------------- helpers
def _put(buf: bytearray, offset: int, fmt: str, *values) -> None:
    struct.pack_into("<" + fmt, buf, offset, *values)


def _le(buf: bytearray, offset: int, size: int, value: int) -> None:
    buf[offset:offset + size] = int(value).to_bytes(size, "little")


def _ascii(text: str | None, size: int) -> bytes:
    """An NVMe string: ASCII, left-justified, space-padded."""
    return (text or "").encode("ascii", "replace")[:size].ljust(size, b" ")


def _ata_string(text: str | None, size: int) -> bytes:
    """An ATA IDENTIFY string: space-padded, each 16-bit word's two characters swapped
    (the first character in the word's high byte)."""
    raw = _ascii(text, size)
    return bytes(b for i in range(0, size, 2) for b in (raw[i + 1], raw[i]))


def _checksum(buf: bytearray) -> None:
    """The last byte makes the 512 bytes sum to 0 mod 256 (ATA SMART structures)."""
    buf[511] = (-sum(buf[:511])) & 0xFF


def _get(doc, *path, default=None):
    for key in path:
        if isinstance(doc, dict) and key in doc:
            doc = doc[key]
        elif isinstance(doc, list) and isinstance(key, int) and key < len(doc):
            doc = doc[key]
        else:
            return default
    return doc


# ---------------------------------------------------------------------------- NVMe
def nvme_pages(doc: dict) -> dict[str, bytes]:
    log = doc["nvme_smart_health_information_log"]
    ctrl = bytearray(4096)
    _put(ctrl, 0, "HH", _get(doc, "nvme_pci_vendor", "id", default=0),
         _get(doc, "nvme_pci_vendor", "subsystem_id", default=0))
    ctrl[4:24] = _ascii(doc.get("serial_number"), 20)
    ctrl[24:64] = _ascii(doc.get("model_name"), 40)
    ctrl[64:72] = _ascii(doc.get("firmware_version"), 8)
    _le(ctrl, 73, 3, doc.get("nvme_ieee_oui_identifier", 0))          # IEEE OUI, LE
    _put(ctrl, 78, "H", doc.get("nvme_controller_id", 0))
    _put(ctrl, 80, "I", _get(doc, "nvme_version", "value", default=0))  # 0: "<1.2"
    ctrl[262] = STAND_INS["nvme_error_log_entries_max"] - 1           # ELPE, 0's based
    _put(ctrl, 266, "HH", STAND_INS["nvme_warning_temp_c"] + KELVIN,  # WCTEMP, CCTEMP
         STAND_INS["nvme_critical_temp_c"] + KELVIN)
    _le(ctrl, 280, 16, doc.get("nvme_total_capacity", 0))             # TNVMCAP
    _le(ctrl, 296, 16, doc.get("nvme_unallocated_capacity", 0))       # UNVMCAP
    _put(ctrl, 516, "I", doc.get("nvme_number_of_namespaces", 1))     # NN

    ns = bytearray(4096)
    nsdoc = _get(doc, "nvme_namespaces", 0)
    if nsdoc:
        _put(ns, 0, "QQQ", nsdoc["size"]["blocks"], nsdoc["capacity"]["blocks"],
             nsdoc["utilization"]["blocks"])
        lba_bits = int(nsdoc["formatted_lba_size"]).bit_length() - 1
        ns[128 + 2] = lba_bits                       # LBAF0.LBADS; FLBAS 0 selects it
        eui = nsdoc.get("eui64")
        if eui:
            ns[120:123] = int(eui["oui"]).to_bytes(3, "big")
            ns[123:128] = int(eui["ext_id"]).to_bytes(5, "big")

    smart = bytearray(512)
    smart[0] = log["critical_warning"]
    _put(smart, 1, "H", log["temperature"] + KELVIN)
    smart[3], smart[4], smart[5] = (log["available_spare"], log["available_spare_threshold"],
                                    log["percentage_used"])
    for offset, key in ((32, "data_units_read"), (48, "data_units_written"),
                        (64, "host_reads"), (80, "host_writes"),
                        (96, "controller_busy_time"), (112, "power_cycles"),
                        (128, "power_on_hours"), (144, "unsafe_shutdowns"),
                        (160, "media_errors"), (176, "num_err_log_entries")):
        _le(smart, offset, 16, log[key])                               # 128-bit LE
    _put(smart, 192, "II", log.get("warning_temp_time", 0), log.get("critical_comp_time", 0))
    for i, c in enumerate(log.get("temperature_sensors") or ()):
        _put(smart, 200 + 2 * i, "H", c + KELVIN)

    # Error Information log: the count of entries the drive logged is in the fixture,
    # their contents are not (smartctl 7.3 prints them as text only).  Each entry keeps
    # its Error Count (a lifetime sequence number, newest first); every other field
    # holds the value the specification gives for "not available" (FFFFh ...), so
    # smartctl prints "-" for it.
    errors = bytearray(64 * STAND_INS["nvme_error_log_entries_max"])
    for i in range(min(log["num_err_log_entries"], STAND_INS["nvme_error_log_entries_max"])):
        _put(errors, 64 * i, "QHHHHQIB", log["num_err_log_entries"] - i,
             0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0)
    return {"nvme.id_ctrl": bytes(ctrl), "nvme.id_ns": bytes(ns), "nvme.log.02": bytes(smart),
            "nvme.log.01": bytes(errors)}


# ---------------------------------------------------------------------------- ATA
def _has_self_test_logs(doc: dict) -> bool:
    return "ata_smart_self_test_log" in doc


def ata_identify(doc: dict) -> bytes:
    w = [0] * 256
    blocks = doc["user_capacity"]["blocks"]
    w[0] = 0x0040                                   # ATA device, not removable
    w[47] = 0x8010
    w[49] = 0x0300                                  # LBA, DMA
    w[53] = 0x0007
    w[60], w[61] = min(blocks, 0x0FFFFFFF) & 0xFFFF, min(blocks, 0x0FFFFFFF) >> 16
    w[80] = _get(doc, "ata_version", "major_value", default=0)
    w[81] = _get(doc, "ata_version", "minor_value", default=0)
    logs = _has_self_test_logs(doc)
    wwn = doc.get("wwn")
    w[82] = 0x0001                                  # SMART feature set
    w[83] = 0x4400                                  # valid; 48-bit addresses
    # word 84: valid; SMART error logging; self-test (only where the fixture has a
    # self-test log); WWN.  No General Purpose Logging: over HDIO_DRIVE_CMD smartctl could
    # not read a GP log (READ LOG EXT) anyway
    w[84] = 0x4001 | (0x0002 if logs else 0) | (0x0100 if wwn else 0)
    w[85] = 0x0001                                  # SMART enabled
    w[86] = 0x0400
    w[87] = w[84]
    for i in range(4):
        w[100 + i] = (blocks >> (16 * i)) & 0xFFFF
    logical = doc.get("logical_block_size", 512)
    physical = doc.get("physical_block_size", logical)
    assert logical == 512, "only 512-byte logical sectors are encoded"
    ratio = (physical // logical).bit_length() - 1
    w[106] = 0x4000 | (0x2000 | ratio if ratio else 0)
    if wwn:
        naa, oui, uid = wwn["naa"], wwn["oui"], wwn["id"]
        w[108] = (naa << 12) | (oui >> 12)
        w[109] = ((oui & 0xFFF) << 4) | (uid >> 32)
        w[110], w[111] = (uid >> 16) & 0xFFFF, uid & 0xFFFF
    ff = _get(doc, "form_factor", "ata_value")
    if ff is not None:
        w[168] = ff
    trim = doc.get("trim") or {}
    if trim.get("supported"):
        w[169] = 0x0001
        w[69] |= (0x4000 if trim.get("deterministic") else 0) | (
            0x0020 if trim.get("zeroed") else 0)
    rpm = doc.get("rotation_rate")
    if rpm is not None:
        w[217] = 1 if rpm == 0 else rpm             # 1: solid state
    sata = _get(doc, "sata_version", "value")
    if sata is not None:
        w[222] = 0x1000 | sata                      # serial transport, its versions
    w[76] = _get(doc, "interface_speed", "max", "sata_value", default=0)
    w[77] = _get(doc, "interface_speed", "current", "sata_value", default=0) << 1
    buf = bytearray(struct.pack("<256H", *w))
    buf[20:40] = _ata_string(doc.get("serial_number"), 20)     # words 10-19
    buf[46:54] = _ata_string(doc.get("firmware_version"), 8)   # words 23-26
    buf[54:94] = _ata_string(doc.get("model_name"), 40)        # words 27-46
    buf[510] = 0xA5                                 # integrity word: signature, checksum
    _checksum(buf)
    return bytes(buf)


def ata_smart_values(doc: dict) -> tuple[bytes, bytes]:
    """SMART READ DATA and SMART READ THRESHOLDS."""
    attrs = doc["ata_smart_attributes"]
    table = attrs["table"]
    assert len(table) <= 30
    values, thresholds = bytearray(512), bytearray(512)
    _put(values, 0, "H", attrs["revision"])
    _put(thresholds, 0, "H", attrs["revision"])
    for i, a in enumerate(table):
        raw = a["raw"]["value"]
        # the 48-bit raw value, its bytes least significant first (smartctl's default
        # byte order "543210"); bits above 48 are the reserved byte (the "r" of the
        # raw56 and msec24hour32 formats' "r543210")
        entry = struct.pack("<BHBB", a["id"], a["flags"]["value"], a.get("value", 0),
                            a.get("worst", 0)) + (raw & 0xFFFFFFFFFFFF).to_bytes(6, "little") \
            + bytes([(raw >> 48) & 0xFF])
        values[2 + 12 * i:14 + 12 * i] = entry
        thresholds[2 + 12 * i] = a["id"]
        thresholds[3 + 12 * i] = a.get("thresh", 0)
    data = doc.get("ata_smart_data")
    if data:
        values[362] = data["offline_data_collection"]["status"]["value"]
        values[363] = data["self_test"]["status"]["value"]
        _put(values, 364, "H", data["offline_data_collection"].get("completion_seconds", 0))
        caps = data["capabilities"]["values"]
        values[367] = caps[0]
        _put(values, 368, "H", caps[1])
        values[370] = 0x01 if data["capabilities"].get("error_logging_supported") else 0
        polling = data["self_test"].get("polling_minutes") or {}
        values[372] = polling.get("short", 0)
        ext = polling.get("extended", 0)
        values[373] = ext if ext < 0xFF else 0xFF
        _put(values, 375, "H", ext)
        values[374] = polling.get("conveyance", 0)
    else:
        # the fixture did not read it (--attributes without --capabilities): no offline
        # data collection, no self-tests; SMART data saved before power-saving
        values[370] = 0x01                          # error logging supported
        _put(values, 368, "H", 0x0003)
    _checksum(values)
    _checksum(thresholds)
    return bytes(values), bytes(thresholds)


def ata_error_log(doc: dict) -> bytes:
    """SMART error log (log address 01h): its count and the (up to 5) errors kept."""
    summary = doc["ata_smart_error_log"]["summary"]
    buf = bytearray(512)
    buf[0] = summary.get("revision", 1)
    kept = summary.get("table") or []
    assert len(kept) <= 5
    # the pointer (1-based) names the newest error's slot, the older ones are before it
    # in the circular buffer; a drive keeps (count - pointer) a multiple of 5
    # (ataprint.cpp PrintSmartErrorlog warns otherwise)
    pointer = (summary["count"] - 1) % 5 + 1 if kept else 0
    buf[1] = pointer
    for k, err in enumerate(kept):
        base = 2 + 90 * ((pointer - 1 - k) % 5)
        # smartctl lists commands[4] first: the fixture's previous_commands are in that
        # order
        for c, cmd in enumerate(err.get("previous_commands") or ()):
            r = cmd["registers"]
            lba = r.get("lba", 0)
            _put(buf, base + 12 * (4 - c), "8BI", r.get("device_control", 0),
                 r.get("features", 0), r.get("count", 0), lba & 0xFF, (lba >> 8) & 0xFF,
                 (lba >> 16) & 0xFF, r.get("device", 0), r.get("command", 0),
                 cmd.get("powerup_milliseconds", 0))
        r = err["completion_registers"]
        lba = r.get("lba", 0)
        e = base + 60
        buf[e + 1:e + 8] = bytes([r.get("error", 0), r.get("count", 0), lba & 0xFF,
                                  (lba >> 8) & 0xFF, (lba >> 16) & 0xFF, r.get("device", 0),
                                  r.get("status", 0)])
        # e + 27, the device's state then: smartctl's JSON does not keep it; 0 "unknown"
        _put(buf, e + 28, "H", err.get("lifetime_hours", 0))
    _put(buf, 452, "H", summary["count"])
    _checksum(buf)
    return bytes(buf)


def ata_self_test_log(doc: dict) -> bytes:
    """SMART self-test log (06h): up to 21 entries, newest at the most-recent index."""
    std = doc["ata_smart_self_test_log"]["standard"]
    table = std.get("table") or []
    assert len(table) <= 21
    buf = bytearray(512)
    _put(buf, 0, "H", std.get("revision", 1))
    for k, t in enumerate(table):
        slot = len(table) - 1 - k
        _put(buf, 2 + 24 * slot, "BBHBI", t["type"]["value"], t["status"]["value"],
             t["lifetime_hours"], 0, t.get("lba", 0xFFFFFFFF))
    buf[508] = len(table)                           # 1-based index of the newest
    _checksum(buf)
    return bytes(buf)


def ata_selective_log(doc: dict) -> bytes:
    sel = doc["ata_smart_selective_self_test_log"]
    buf = bytearray(512)
    _put(buf, 0, "H", sel.get("revision", 1))
    for i, span in enumerate(sel.get("table") or ()):
        _put(buf, 2 + 16 * i, "QQ", span.get("lba_min", 0), span.get("lba_max", 0))
    _put(buf, 502, "H", _get(sel, "flags", "value", default=0))   # flags; 492: current LBA, 500: span
    _put(buf, 508, "H", sel.get("power_up_scan_resume_minutes", 0))
    _checksum(buf)
    return bytes(buf)


def ata_pages(doc: dict) -> dict[str, bytes]:
    values, thresholds = ata_smart_values(doc)
    pages = {"ata.identify": ata_identify(doc), "ata.smart_values": values,
             "ata.thresholds": thresholds, "ata.log.01": ata_error_log(doc),
             "ata.status": bytes([0 if doc["smart_status"]["passed"] else 1])}
    logdir = bytearray(512)
    _put(logdir, 0, "H", 1)
    logdir[2 * (0x01 - 1) + 2] = 1                  # entry[addr - 1].numsectors
    if _has_self_test_logs(doc):
        pages["ata.log.06"] = ata_self_test_log(doc)
        logdir[2 * (0x06 - 1) + 2] = 1
    if "ata_smart_selective_self_test_log" in doc:
        pages["ata.log.09"] = ata_selective_log(doc)
        logdir[2 * (0x09 - 1) + 2] = 1
    pages["ata.log.00"] = bytes(logdir)
    return pages


# ---------------------------------------------------------------------------- the file
def pages_for(name: str) -> dict[str, bytes]:
    doc = load(name)
    return nvme_pages(doc) if DRIVES[name] == "nvme" else ata_pages(doc)


def write_data(path: Path, pages: dict[str, bytes]) -> Path:
    """The data file smartshim.c reads: "SMSHIM01", then per page a 16-byte NUL-padded
    name, a little-endian u32 length and the bytes."""
    out = bytearray(b"SMSHIM01")
    for key, data in pages.items():
        assert len(key) <= 16, key
        out += key.encode().ljust(16, b"\0") + struct.pack("<I", len(data)) + data
    Path(path).write_bytes(bytes(out))
    return Path(path)
