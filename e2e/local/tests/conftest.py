"""Unit tests of the node agent's pure logic: its modules import each other by plain name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "node_agent"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
