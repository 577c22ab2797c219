"""Full proxy v2 (PROTOCOL.md): full proxy v1's run with the base-demo mix doubled (250 scenes per family).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/full_proxy_v2/run.py --seed 9 --out experiments/full_proxy_v2/raw-s9.json
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("full_proxy_v1", ROOT / "experiments" / "full_proxy_v1" / "run.py")
V1 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(V1)
V1.S.MIX = 250

if __name__ == "__main__":
    V1.main()
