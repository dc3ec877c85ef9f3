import builtins

import pytest


@pytest.fixture
def without_plotly(monkeypatch):
    """Make ``import plotly`` (and its submodules) fail, as on a machine without the package."""
    real_import = builtins.__import__

    def no_plotly(name, *args, **kwargs):
        if name.startswith("plotly"):
            raise ImportError("no plotly here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_plotly)
