"""What a loaded model leaves on Python's heap, kept out of the cyclic garbage collector's full collections.

A loaded model is hundreds of thousands of Python objects (SmolLM2-135M with the shipped model beside it: ~174K), and
a full collection walks them all: 30–37 ms holding the interpreter, which a decode loop's allocations trigger every
few hundred steps (a perf profile of SmolLM2 Q4_K_M decoding: 2.4% of the samples in the collector), on whichever
thread allocates, so a keystroke's answer could wait for one. `settle()` after a load collects once and freezes what
is alive (`gc.freeze`): later collections walk only what came after. `release()` before a model is dropped puts the
frozen objects back under the collector, so that the old model's reference cycles can be freed.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect, then freeze every object alive (the models just loaded among them); returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def release() -> None:
    """Unfreeze: what settle() froze is the collector's again (a model about to be replaced can be freed)."""
    gc.unfreeze()
