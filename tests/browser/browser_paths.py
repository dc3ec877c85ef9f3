"""Paths the browser tests share (a module of its own: test modules cannot import a conftest by name)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
DOC_SHOTS = REPO / "docs" / "screenshots"
COMMITTED_RESULTS = sorted((REPO / "results").glob("*.json"))
"""The GPU result files committed under results/ (the service imports them at start)."""
