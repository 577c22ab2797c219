"""Full proxy v2's analysis: v1's (`../full_proxy_v1/analyze.py`) on this folder's raw files → analysis.json.

    .venv/bin/python experiments/full_proxy_v2/analyze.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("full_proxy_v1_analyze", HERE.parent / "full_proxy_v1" / "analyze.py")
V1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(V1)
V1.HERE = HERE

if __name__ == "__main__":
    V1.main()
