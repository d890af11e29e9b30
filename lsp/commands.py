"""`workspace/executeCommand`: `infill.workerInfo`, the worker's model, device, versions,
limits and counters (the editors' status and `:InfillInfo`)."""

from __future__ import annotations

from typing import Any

from diffusion_infill.infill.core.errors import InfillError
from diffusion_infill.lsp.host import Feature, request_failed

WORKER_INFO = "infill.workerInfo"


class WorkerInfoCommand(Feature):
    def register(self) -> None:
        self.host.command(WORKER_INFO)(self.worker_info)

    async def worker_info(self, *args: Any) -> dict[str, Any]:
        try:
            info = await self.host.worker.info()
        except InfillError as exc:
            raise request_failed(self.host, exc, WORKER_INFO, show=False) from None
        return info.to_dict()
