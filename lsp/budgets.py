"""What an inline completion may spend on the worker's machine: its deadline, its passes
and its canvas, each a setting when set, else chosen by what the worker said it computes
on (`Machine`): a slow CPU (fp32, or int8 for want of bf16 instructions) gets fewer passes
while the user types on a line and a smaller canvas, an accelerator a larger canvas and a
longer deadline."""

from __future__ import annotations

from dataclasses import dataclass

from diffusion_infill.lsp.settings import Settings

CPU_DEADLINE_MS = 600  # a one-line completion on a CPU (idle: 40-160 ms p50)
CPU_MULTILINE_DEADLINE_MS = 1200  # on an empty line (idle: 180-500 ms p50)
GPU_DEADLINE_MS = 2000  # any completion on an accelerator (a bigger model, a network hop)
# passes of a one-line completion when `completionSteps` is unset: fewer while typing on
# a line already completed, on a CPU that runs the model without bf16 (fp32 or int8), where
# typing is slowest (docs/log/architecture.md, "Three passes while typing"); a line's first
# completion takes as many everywhere
COMPLETION_STEPS = 4
SLOW_CPU_TYPING_STEPS = 3
# and of a completion on an empty line ("Six passes for an empty line" there)
MULTILINE_STEPS = 8
SLOW_CPU_MULTILINE_STEPS = 6
# canvas tokens of a one-line completion when `completionWindowTokens` is unset: more
# context is right more often, at a cost that grows with it: as much as keeps a line's
# first completion within 80 ms on a CPU with bf16, less on one without, more on an
# accelerator (docs/log/architecture.md, "A wider window for a one-line completion")
COMPLETION_WINDOW = 256
SLOW_CPU_COMPLETION_WINDOW = 128
ACCELERATOR_COMPLETION_WINDOW = 384


@dataclass(frozen=True)
class Machine:
    """What the worker said it computes on, and whether its fills carry a confidence
    (None, False: not said yet)."""

    device: str | None = None  # "cpu", "cuda:0", ...
    precision: str | None = None  # "bf16", "fp32", "int8"
    cpu_bf16: bool = False  # the CPU has bf16 instructions
    confidence: bool = False  # the model's fills carry a calibrated confidence

    @property
    def cpu(self) -> bool:
        return self.device is not None and self.device.split(":")[0] == "cpu"

    @property
    def slow_cpu(self) -> bool:
        """A CPU computing in fp32, or in int8 for want of bf16 instructions (int8 on a
        CPU that has them was timed the faster there, not chosen as the only fast one)."""
        if not self.cpu:
            return False
        return self.precision == "fp32" or (self.precision == "int8" and not self.cpu_bf16)

    @property
    def accelerator(self) -> bool:
        return self.device is not None and not self.cpu


UNKNOWN = Machine()  # before the worker has said


def completion_deadline(s: Settings, machine: Machine, multiline: bool) -> float | None:
    """Seconds a completion may take (None: no limit): `completionDeadline` when set, else
    by the worker's machine (before it has said: a CPU's)."""
    ms = s.completion_deadline
    if ms is None:
        if machine.accelerator:
            ms = GPU_DEADLINE_MS
        else:
            ms = CPU_MULTILINE_DEADLINE_MS if multiline else CPU_DEADLINE_MS
    return ms / 1000 if ms else None


def completion_steps(
    s: Settings, machine: Machine, multiline: bool = False, typing: bool = False
) -> int:
    """Most passes of a completion, one-line or on an empty line: `completionSteps` /
    `multilineSteps` when set, else by the worker's machine: fewer on a slow CPU (fp32, or
    int8 without bf16 instructions) than elsewhere and before the worker has said; for a
    one-line completion there only while `typing` (the line's completion was asked before)."""
    setting = s.multiline_steps if multiline else s.completion_steps
    if setting is not None:
        return setting
    if multiline:
        return SLOW_CPU_MULTILINE_STEPS if machine.slow_cpu else MULTILINE_STEPS
    return SLOW_CPU_TYPING_STEPS if machine.slow_cpu and typing else COMPLETION_STEPS


def completion_window(s: Settings, machine: Machine) -> int:
    """Canvas tokens of a one-line completion: `completionWindowTokens` when set, else by
    the worker's machine: fewest on a slow CPU (fp32, or int8 without bf16 instructions),
    most on an accelerator, in between on another CPU and before the worker has said."""
    if s.completion_window is not None:
        return s.completion_window
    if machine.accelerator:
        return ACCELERATOR_COMPLETION_WINDOW
    return SLOW_CPU_COMPLETION_WINDOW if machine.slow_cpu else COMPLETION_WINDOW
