"""docs/ARCHITECTURE.md stays true: every source file of the four floors and the page is named in its map, and
every file path it names exists (a file added, renamed or removed without the map fails here)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
FLOORS = ("rmsnorm_kernels/", "engine/", "app/", "rmsnorm_dash/", "static/js/")


def _sources() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.py", "*.js"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [p for p in out.stdout.split() if p.startswith(FLOORS) and not p.endswith("/__init__.py")]


def test_every_source_file_is_in_the_map():
    files = _sources()
    assert len(files) > 50  # the listing itself worked
    words = set(re.findall(r"[\w.-]+\.(?:py|js)\b", DOC))  # names may have hyphens (naive-chain.js)
    missing = [p for p in files if Path(p).name not in words]
    assert not missing, f"not described in docs/ARCHITECTURE.md: {missing}"


def test_every_path_the_doc_names_exists():
    named = set(
        re.findall(
            r"`((?:rmsnorm_kernels|engine|app|rmsnorm_dash|static|templates|tests|bench|examples)/[\w/.-]*\.(?:py|js|html|css))`",
            DOC,
        )
    )
    assert len(named) > 20
    gone = sorted(p for p in named if not (ROOT / p).is_file())
    assert not gone, f"docs/ARCHITECTURE.md names files that do not exist: {gone}"
