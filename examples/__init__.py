"""Example plugins: load one with ``RMSNORM_PLUGINS=examples.dock_plugin`` or ``--plugin examples.dock_plugin``."""
