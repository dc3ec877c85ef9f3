"""The Ray actor of one GPU of the fleet (`app.fleet`): what `app.worker_child` is to a local worker process, for
a GPU on any node of a Ray cluster. Ray places it (``num_gpus=1``, pinned to its node) and sets its
CUDA_VISIBLE_DEVICES, so inside it the GPU is ``cuda``; the header and the rows say which one it really is (host,
the GPU's index on its host, name, UUID).

It gets ready as a local worker does (`worker_child.get_ready`: the registry with the service's plug-ins, one
`DeviceBench`, the copy ceiling of *this* GPU measured once), then runs the engine's one run path,
`engine.runner.iter_run`, with the cases fed one per `measure` call: each call returns its row as soon as it is
measured, which is how the service's stream, store and page get it unchanged.

A node with no CUDA (the tests' fake GPUs: ``num_gpus`` declared on a CPU node) runs the engine on the CPU, and
the device it reports says so (``"cpu (Ray GPU slot 1 on host-a, no CUDA)"``, mode ``cpu``).

This module imports no web framework, and Ray only inside the actor: `app.ray_worker` wraps the class with
``ray.remote``, and each node imports it from its own install of the package.
"""

from __future__ import annotations

import os
import socket
import traceback
from typing import Any, Iterator, Optional

from app.worker_child import get_ready, self_check_case
from app.worker_protocol import Ready, RunFailed, StartFailed, tag_device


def use_the_node_threads() -> int:
    """Give torch as many threads as a local worker process has. Ray sets ``OMP_NUM_THREADS`` to an actor's CPUs,
    and to 1 for ours (``num_cpus=0``: a GPU actor must not hold the node's CPUs from other work), so torch's host
    side (the CPU engine, the fp64 reference of CPU rows) ran on one core where a local worker uses every core it may
    run on. Returns the thread count."""
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if os.environ.get("OMP_NUM_THREADS") == "1":  # Ray's (it leaves a value set on the node alone)
        torch.set_num_threads(cores)
    return torch.get_num_threads()


def undo_worker_niceness() -> int:
    """Ray starts its workers at nice 15 (its ``worker_niceness``) so that its own processes win the CPU; an actor
    that times host work (launches, allocations) must not lose the CPU to every other process of the node. Back to
    the service's 0 where the process may (root or CAP_SYS_NICE; else ``RAY_worker_niceness=0`` on ``ray start``
    does it for every worker). Returns the nice value the actor measures at."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    except (OSError, AttributeError):  # not allowed (or not POSIX): stays as Ray set it
        pass
    return os.nice(0)


class _Feed:
    """The cases of the run in progress, handed to `iter_run` one at a time (it draws the next one only after
    yielding the previous row)."""

    def __init__(self) -> None:
        self.next: Any = None
        self.closed = False

    def __iter__(self) -> Iterator:
        while not self.closed and self.next is not None:
            case, self.next = self.next, None
            yield case


class GpuActor:
    """One GPU of the fleet. Methods run one at a time (a plain Ray actor), in the order the service calls them:
    ``ready()`` once, then per run ``begin`` → ``measure`` … → ``end``."""

    def __init__(
        self,
        label: str,
        plugins: tuple[str, ...],
        ceiling_bytes: Optional[int],
        known_ceiling: Any = None,
        self_check: bool = False,
    ) -> None:
        self.label = label
        self._run = None
        self._feed: Optional[_Feed] = None
        try:
            import ray

            use_the_node_threads()
            undo_worker_niceness()
            cuda = _has_cuda()
            self.bench = get_ready("cuda:0" if cuda else "cpu:0", plugins, ceiling_bytes, known_ceiling)
            gpu_ids = ray.get_gpu_ids()
            self.tags = _fleet_tags(label, cuda, gpu_ids[0] if gpu_ids else None)
            self.hello: Any = Ready(
                info=self._tagged_device(self.bench.info),
                pid=os.getpid(),
                ceiling=self.bench.ceiling(),
                self_check=self_check_case(self.bench) if self_check else None,
            )
        except BaseException:
            self.hello = StartFailed(traceback.format_exc(limit=8))

    def ready(self) -> Any:
        return self.hello

    def begin(self, sweep, run_id: str, implementations: list[str]):
        """Start the engine's run; returns its header (with this GPU's ceiling), tagged."""
        from engine.runner import iter_run

        self.end()
        self._feed = _Feed()
        self._run = iter_run(
            sweep,
            device=str(self.bench.device),
            run_id=run_id,
            bench=self.bench,
            registry=self.bench.registry,
            cases=self._feed,
            implementations=implementations,
        )
        try:
            return self._tagged(next(self._run))
        except Exception as exc:
            self._run = None
            return RunFailed(f"{type(exc).__name__}: {exc}")

    def measure(self, case):
        """The row of one case of the run in progress (`RunFailed` if the engine raised)."""
        if self._run is None:
            return RunFailed("no run was begun in this actor")
        self._feed.next = case
        try:
            return self._tagged(next(self._run))
        except Exception as exc:  # the engine never raises for a kernel's failure; this is anything else
            self._run = None
            return RunFailed(f"{type(exc).__name__}: {exc}")

    def end(self) -> None:
        if self._run is not None:
            self._feed.closed = True
            self._run.close()
        self._run = self._feed = None

    def _tagged(self, item):
        return item.model_copy(update={"device": self._tagged_device(item.device)})

    def _tagged_device(self, device):
        """A header's or row's ``device`` with the worker label and where in the fleet it is."""
        return type(device).model_validate({**tag_device(device.model_dump(), self.label), **self.tags})


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _fleet_tags(label: str, cuda: bool, gpu_id: Optional[str]) -> dict:
    """What a row and the header add to say where in the fleet they were measured: the host, and the GPU's index
    on that host (Ray's id of it: the one nvidia-smi shows), which ``cuda:0`` inside the actor does not say."""
    host = socket.gethostname()
    index = int(gpu_id) if gpu_id is not None and str(gpu_id).isdigit() else None
    tags: dict = {"host": host, "index": index}
    if not cuda:
        # no CUDA on this node (fake GPUs of a test cluster): measured on the CPU, and every name says so
        tags["uuid"] = f"cpu-{label}"
        tags["name"] = f"cpu (Ray GPU slot {gpu_id} on {host}, no CUDA)"[:64]
    return tags
