"""The front door: the ``rmsnorm-dash`` command line, above the rest of the project — the kernels (`rmsnorm_kernels/`), their
benchmark engine (`engine/`) and the web service (`app/`, imported only by ``rmsnorm-dash serve``)."""
