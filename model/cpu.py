"""What the CPU offers: its feature flags, and whether oneDNN may use its VNNI instructions
(int8 dot products; model/int8.py picks its kernel by it)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
# oneDNN ISA caps (`ONEDNN_MAX_CPU_ISA`) that include VNNI: AVX2_VNNI, AVX512_CORE_VNNI,
# AVX512_CORE_BF16, AVX512_CORE_FP16, AVX10_1_512, AVX512_CORE_AMX, ...
VNNI_CAPS = ("VNNI", "BF16", "FP16", "AMX", "AVX10")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not readable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_vnni(flags: Collection[str] | None = None, env: Mapping[str, str] = os.environ) -> bool:
    """Whether oneDNN may use VNNI here: the CPU's flags name it and `ONEDNN_MAX_CPU_ISA`,
    when set, does not cap oneDNN below it (AVX2, as when a CPU without it is emulated)."""
    if not set(cpu_flags() if flags is None else flags) & VNNI_FLAGS:
        return False
    cap = env.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return not cap or cap == "ALL" or any(name in cap for name in VNNI_CAPS)
