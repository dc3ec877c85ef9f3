"""RMSNorm implementations (Triton kernels and baselines), their registry and their dγ families: the ground floor
(the benchmark engine is `engine/`)."""

__version__ = "0.1.0"
"""The project's version: pyproject.toml reads it from here (one source for the package, the run header and
/api/health)."""
