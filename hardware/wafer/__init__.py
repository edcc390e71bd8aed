"""The wafer-scale engine emulator: a Device whose tiles are fixed-capacity SRAM arenas on a 2-D mesh.

`WaferDevice(dtype=..., spec="wse-3" | "mini-32x32" | WaferSpec, analytic=False, spill=False)` is what
`open_device("wafer", ...)` builds. Modules: spec (WaferSpec and presets), tiles (arenas and the tile-memory table),
placement (where each tensor goes), collectives (two-level tree reductions and their cost), ops and attention (each
operation on real numbers and as phases), cost (phases to cycles and seconds), device (the Device), plot.
"""

from waferline.hardware.wafer.cost import CostReport, report
from waferline.hardware.wafer.device import WaferDevice
from waferline.hardware.wafer.spec import PRESETS, PUBLISHED, WaferSpec, get_spec
from waferline.hardware.wafer.tiles import WaferOutOfMemory

__all__ = ["PRESETS", "PUBLISHED", "CostReport", "WaferDevice", "WaferOutOfMemory", "WaferSpec", "get_spec", "report"]
