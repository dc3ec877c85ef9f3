"""The front door: the ``rmsnorm-dash`` command line, above both halves of the project — the kernels and their
benchmark engine (`kernels/`) and the web service (`app/`, imported only by ``rmsnorm-dash serve``)."""
