"""The wafer-scale engine emulator: a Device whose tiles are fixed-capacity SRAM arenas on a 2-D mesh.

`WaferDevice(dtype=..., spec="wse-3" | "mini-32x32" | WaferSpec, analytic=False, spill=False)` is what
`open_device("wafer", ...)` builds; `MultiWaferDevice(wafers=N, n_layers=L, ...)` splits a model's layers over N
of them as pipeline stages (multi.py). Modules: spec (WaferSpec and presets), tiles (arenas and the tile-memory
table), placement (where each tensor goes), collectives (two-level tree reductions and their cost), routes
(routing colours and a plan that fits them), ops and attention (each operation on real numbers and as phases),
cost (phases to cycles and seconds), system (host I/O and links between systems), device (the Device), multi,
plot; configs holds published model configurations for analytic projection.
"""

from waferline.hardware.wafer.cost import CostReport, report
from waferline.hardware.wafer.multi import MultiWaferDevice
from waferline.hardware.wafer.routes import WaferRoutingError
from waferline.hardware.wafer.spec import PRESETS, PUBLISHED, WaferSpec, get_spec
from waferline.hardware.wafer.tiles import WaferOutOfMemory
from waferline.hardware.wafer.wafer_device import WaferDevice

__all__ = [
    "PRESETS",
    "PUBLISHED",
    "CostReport",
    "MultiWaferDevice",
    "WaferDevice",
    "WaferOutOfMemory",
    "WaferRoutingError",
    "WaferSpec",
    "get_spec",
    "report",
]
