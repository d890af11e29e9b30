"""What the CPU offers: its feature flags."""

from __future__ import annotations

from pathlib import Path

BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})  # bf16 instructions (AVX-512 BF16, AMX)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not readable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()
