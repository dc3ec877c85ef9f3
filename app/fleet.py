"""The fleet: the GPUs of a Ray cluster as the service's devices (``rmsnorm-dash serve --ray ADDRESS``).

At start the service joins the cluster (``ray.init(address=...)``; ``auto`` = the cluster this machine is part
of) and lists its GPUs: every alive node's ``GPU`` resource, one *slot* per GPU, labelled ``cuda:0 … cuda:K-1``
across the fleet (nodes in the order of their host names). Each slot's GPU model comes from the node's
``accelerator_type:<model>`` resource, which Ray sets by itself on an NVIDIA node (``H100``, ``A100-80G``, ``L40S``)
and a test declares on a CPU node. The scheduler drives each slot through a `app.ray_worker.RayWorker`: the same
worker handle as a local process, so queues, split runs, time limits, restarts, the stream and the store are the
ones the local service has.

Only the service process talks to Ray; each node runs the actor (`app.ray_actor`) from its own install of the
package (README, "A fleet of GPU machines").
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from typing import Optional

from app.edge import listening_sockets, not_http

log = logging.getLogger("rmsnorm.fleet")

NODE_CACHE_S = 1.0
"""How long a look at the cluster's nodes is reused (every dispatcher thread asks whether its node is alive)."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One GPU of the fleet, before any actor runs on it."""

    node_id: str
    host: str
    address: str
    model: Optional[str]
    """The node's ``accelerator_type`` (``H100``), if Ray knows it."""
    slot: int
    """Which of its node's GPUs this is, as the fleet counts them (Ray picks the physical one)."""
    node_labels: tuple[str, ...] = ()

    def names(self) -> list[str]:
        """What a request's ``node`` may say to mean this node: host name, address, node id, a label's value."""
        return [self.host, self.address, self.node_id, *self.node_labels]


class FleetUnavailable(RuntimeError):
    """The Ray cluster cannot be joined, or has no GPU."""


class RayFleet:
    def __init__(self, address: str) -> None:
        self.address = address
        self.instance = uuid.uuid4().hex[:6]
        """In the actors' names, so two dashboards on one cluster never take each other's."""
        self.slots: dict[str, Slot] = {}
        self._actor_class = None
        self._nodes: list[dict] = []
        self._nodes_at = 0.0
        self._lock = threading.Lock()
        self._created = 0

    # -- joining ---------------------------------------------------------------------------------------------------

    def connect(self) -> "RayFleet":
        """Join the cluster and list its GPUs (raises `FleetUnavailable` with the reason)."""
        try:
            import ray
        except ImportError as exc:
            raise FleetUnavailable(f"--ray needs Ray: pip install -e '.[fleet]' ({exc})") from None
        from app.ray_worker import NAMESPACE

        if not ray.is_initialized():
            _reachable(self.address)
            before = set(listening_sockets())
            try:
                ray.init(
                    address=self.address,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    configure_logging=False,
                )
            except Exception as exc:  # ConnectionError, a version mismatch, …: the cluster's own words
                raise FleetUnavailable(f"could not join the Ray cluster at {self.address!r}: {exc}") from None
            # the driver's own gRPC server listens on every address (Ray's token guards it); it serves no HTTP, so
            # the token, Host and exposure rules of the service stay those of the socket uvicorn binds
            not_http(set(listening_sockets()) - before)
        slots = self.discover()
        if not slots:
            raise FleetUnavailable(
                f"the Ray cluster at {self.address!r} has no GPU: start its nodes with their "
                "GPUs (ray start … --num-gpus N) and start the service again"
            )
        self.slots = {f"cuda:{i}": slot for i, slot in enumerate(slots)}
        log.warning(
            "fleet at %s: %d GPU(s) on %d node(s)", self.address, len(slots), len({slot.node_id for slot in slots})
        )
        return self

    def discover(self) -> list[Slot]:
        """One slot per GPU of every alive node."""
        slots = []
        for node in sorted(
            self.nodes(fresh=True),
            key=lambda n: (n.get("NodeManagerHostname", ""), n.get("NodeManagerAddress", ""), n["NodeID"]),
        ):
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            models = sorted(key.partition(":")[2] for key in resources if key.startswith("accelerator_type:"))
            labels = tuple(
                str(value) for key, value in (node.get("Labels") or {}).items() if not key.startswith("ray.io/")
            )
            for k in range(int(resources.get("GPU", 0))):
                slots.append(
                    Slot(
                        node_id=node["NodeID"],
                        host=node.get("NodeManagerHostname", "?"),
                        address=node.get("NodeManagerAddress", "?"),
                        model=models[0] if models else None,
                        slot=k,
                        node_labels=labels,
                    )
                )
        return slots

    def labels(self) -> list[str]:
        return list(self.slots)

    def close(self) -> None:
        """Leave the cluster (the actors this service made go with it)."""
        try:
            import ray

            if ray.is_initialized():
                ray.shutdown()
        except Exception:
            log.debug("ray.shutdown failed", exc_info=True)

    # -- what the workers ask --------------------------------------------------------------------------------------

    def worker(
        self, label: str, plugins: tuple[str, ...] = (), ceiling_bytes: int | None = None, self_check: bool = False
    ):
        """The scheduler's worker factory: the `RayWorker` of one slot."""
        from app.ray_worker import RayWorker

        return RayWorker(
            label, self.slots[label], self, plugins=plugins, ceiling_bytes=ceiling_bytes, self_check=self_check
        )

    def create_actor(self, label: str, slot: Slot, plugins, ceiling_bytes, known_ceiling, self_check: bool):
        """A `GpuActor` holding one GPU of the slot's node (the call returns at once; Ray starts it)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from app.ray_actor import GpuActor
        from app.ray_worker import NAMESPACE, actor_name

        with self._lock:
            if self._actor_class is None:
                self._actor_class = ray.remote(GpuActor)
            self._created += 1
            name = f"{actor_name(label)}-{self.instance}-{self._created}"
        return self._actor_class.options(
            name=name,
            namespace=NAMESPACE,
            num_gpus=1,
            num_cpus=0,
            max_restarts=0,
            max_task_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False),
        ).remote(label, tuple(plugins), ceiling_bytes, known_ceiling, self_check)

    def kill_actor(self, actor) -> None:
        try:
            import ray

            ray.kill(actor, no_restart=True)
        except Exception:  # already gone, or Ray is shutting down
            log.debug("ray.kill failed", exc_info=True)

    def nodes(self, fresh: bool = False) -> list[dict]:
        """The cluster's nodes (``ray.nodes()``), looked at most once a second."""
        import ray

        with self._lock:
            if fresh or time.monotonic() - self._nodes_at > NODE_CACHE_S:
                try:
                    self._nodes = ray.nodes()
                    self._nodes_at = time.monotonic()
                except Exception:
                    log.debug("ray.nodes failed", exc_info=True)
            return self._nodes

    def node_alive(self, node_id: str) -> bool:
        return any(node["NodeID"] == node_id and node.get("Alive") for node in self.nodes())

    # -- /api/health ---------------------------------------------------------------------------------------------

    def status(self, devices: list[dict]) -> dict:
        """The fleet for /api/health and the page: every node, alive or not, with its GPUs (label, model, queue,
        ready) as the scheduler sees them."""
        nodes = {node["NodeID"]: node for node in self.nodes()}
        out = []
        for node_id in dict.fromkeys(slot.node_id for slot in self.slots.values()):
            node = nodes.get(node_id, {})
            mine = [d for d in devices if d.get("node") == node_id]
            first = next(slot for slot in self.slots.values() if slot.node_id == node_id)
            out.append(
                {
                    "node_id": node_id,
                    "host": first.host,
                    "address": first.address,
                    "alive": bool(node.get("Alive")),
                    "models": sorted(
                        {slot.model for slot in self.slots.values() if slot.node_id == node_id and slot.model}
                    ),
                    "gpus": [
                        {key: d.get(key) for key in ("label", "index", "name", "uuid", "queue_length", "busy", "ready")}
                        for d in mine
                    ],
                }
            )
        return {"nodes": out, "gpus": len(self.slots), "ready": sum(1 for d in devices if d.get("ready"))}


def _reachable(address: str, timeout: float = 10.0) -> None:
    """A ``host:port`` address must answer a TCP connection first: ``ray.init`` would wait for minutes on one where
    nothing listens (``auto`` and ``ray://`` addresses are left to Ray)."""
    import socket

    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise FleetUnavailable(
            f"could not join the Ray cluster at {address!r}: nothing answers there ({exc}); "
            "start its head with `ray start --head --port=PORT`"
        ) from None
