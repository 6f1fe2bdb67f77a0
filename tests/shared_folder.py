"""Where the shared/ folder is (the verbatim spec copies, the peers' pinned requirements, the
conformance runner): $MCPX_SHARED, else the `shared` folder beside the checkout. Every test that
reads from it asks here, so a checkout anywhere runs them all with MCPX_SHARED set."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("MCPX_SHARED") or Path(__file__).resolve().parents[1].parent / "shared").resolve()
SPEC = SHARED / "spec" / "upstream"
