"""Inference on Ray: N engine actors share one run's buckets; results stream back to the driver's sink.

    pipeline run --executor ray [--address auto|ray://HOST:PORT] [--replicas N]

What runs where:
- the driver (this process) ingests, tokenises (the tokenizer only: `engine.load_tokenizer`, no weights), plans
  and buckets, and owns the one transactional sink: staging, commit and publish are exactly those of an
  in-process run;
- each actor (`EngineActor`, one per replica; one GPU each when the engine runs on CUDA) loads the model once and
  runs whole buckets through `pipeline.infer.in_process.infer` (engine, grammar, grounding, validation), returning the
  bucket's rows and error rows.

Buckets are dealt to the actors as they free up (two in flight per actor, so an actor never idles while its
next bucket travels). A bucket whose actor dies is given to a fresh actor, and only the driver writes results,
once per bucket id, so nothing is lost or written twice. Row ids and outputs do not depend on which actor ran a
request: a bucket is one `generate` call on the same engine settings, and greedy outputs do not depend on the
batch or the prefix cache (see README *Determinism*).

Ray is optional (`pip install 'finllm-pipeline[ray]'`); without it the default in-process executor loses nothing.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.config import ExecutorOptions
from pipeline.infer.in_process import BucketResult, engine_errors, infer
from pipeline.plan.bucketing import Bucket

# Buckets queued on one actor beyond the one it runs.
QUEUE_PER_ACTOR = 1
# Times a bucket is given to a fresh actor before its items become error rows.
MAX_BUCKET_ATTEMPTS = 3


class EngineActor:
    """One engine replica (wrapped with `ray.remote` when the pool starts it)."""

    def __init__(self, model_dir: str, engine_kwargs: dict[str, Any]) -> None:
        from pipeline.models import load_llm  # noqa: PLC0415

        self.llm = load_llm(model_dir, **engine_kwargs)

    def info(self) -> dict[str, Any]:
        return {"max_model_len": self.llm.max_model_len, "kv_capacity_tokens": self.llm.kv_capacity_tokens,
                "config": self.llm.config_summary(), "pid": os.getpid()}

    def run(self, bucket: Bucket, run_fields: dict[str, str]) -> BucketResult:
        (res,) = infer(self.llm, [bucket], run_fields=run_fields)
        return res

    def stats(self) -> dict[str, Any]:
        return self.llm.stats()


def _ray() -> Any:
    try:
        import ray  # noqa: PLC0415
    except ImportError as exc:
        raise RuntimeError("--executor ray needs Ray: pip install 'finllm-pipeline[ray]' (or pip install ray)") from exc
    return ray


class RayEnginePool:
    """The driver's handle on the replicas; looks like an engine to `run_pipeline` (tokenizer, max_model_len,
    config_summary, stats) without loading a model here."""

    def __init__(self, model_dir: Path, engine_kwargs: dict[str, Any], options: ExecutorOptions) -> None:
        from engine import load_tokenizer  # noqa: PLC0415
        from pipeline.models import model_parts  # noqa: PLC0415

        ray = _ray()
        self.options = options
        self.model_dir = str(model_dir)
        self.engine_kwargs = dict(engine_kwargs)
        self.started_ray = False
        if not ray.is_initialized():
            if options.address is None:
                ray.init(num_cpus=options.num_cpus, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=options.address, log_to_driver=False)
            self.started_ray = True
        gpus = options.gpus_per_replica
        if gpus is None:
            gpus = 1.0 if str(engine_kwargs.get("device", "auto")).startswith("cuda") else 0.0
        cpus = options.cpus_per_replica
        if cpus is None:  # Ray gives an actor as many OpenMP threads as CPUs
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)) // options.replicas) if self.started_ray \
                and options.address is None else 1
        self._actor_cls = ray.remote(num_cpus=cpus, num_gpus=gpus)(EngineActor)
        self.actors = [self._start_actor() for _ in range(options.replicas)]
        self.tokenizer = load_tokenizer(model_parts(model_dir)[0])
        self.replaced = 0
        infos = ray.get([a.info.remote() for a in self.actors])
        self.max_model_len = infos[0]["max_model_len"]
        self.kv_capacity_tokens = infos[0]["kv_capacity_tokens"]
        self._engine_config = infos[0]["config"]

    def _start_actor(self) -> Any:
        return self._actor_cls.remote(self.model_dir, self.engine_kwargs)

    def replace(self, i: int) -> None:
        """Actor i died: start a fresh one in its place (it loads the model again)."""
        _ray().kill(self.actors[i], no_restart=True)
        self.actors[i] = self._start_actor()
        self.replaced += 1

    def actor_pids(self) -> list[int]:
        ray = _ray()
        return [info["pid"] for info in ray.get([a.info.remote() for a in self.actors])]

    def config_summary(self) -> dict[str, Any]:
        return {**self._engine_config, "executor": "ray", "replicas": self.options.replicas,
                "address": self.options.address}

    def stats(self) -> dict[str, Any]:
        """Counters summed over the replicas that answer (a dead or replaced actor's counters are gone with it)."""
        ray = _ray()
        from ray.exceptions import RayActorError  # noqa: PLC0415

        per = []
        for a in self.actors:
            try:
                per.append(ray.get(a.stats.remote(), timeout=60))
            except (RayActorError, ray.exceptions.GetTimeoutError):
                continue
        total: dict[str, Any] = {}
        for s in per:
            for k, v in s.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and not k.endswith("_rate"):
                    total[k] = total.get(k, 0) + v
        total["replicas"] = len(self.actors)
        total["replicas_answering"] = len(per)
        total["actors_replaced"] = self.replaced
        return total

    def shutdown(self) -> None:
        ray = _ray()
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
        if self.started_ray:
            ray.shutdown()


def ray_infer(pool: RayEnginePool, buckets: list[Bucket], *, run_fields: dict[str, str],
              progress: Any = None) -> Iterator[BucketResult]:
    """Yield each bucket's result as an actor finishes it (completion order; the sink keys parts by bucket id)."""
    ray = _ray()
    from ray.exceptions import RayActorError  # noqa: PLC0415

    queue: deque[Bucket] = deque(buckets)
    attempts: dict[str, int] = {}
    in_flight: dict[Any, tuple[int, Bucket]] = {}
    load = [0] * len(pool.actors)

    def submit(i: int) -> None:
        while queue and load[i] <= QUEUE_PER_ACTOR:
            bucket = queue.popleft()
            attempts[bucket.bucket_id] = attempts.get(bucket.bucket_id, 0) + 1
            in_flight[pool.actors[i].run.remote(bucket, run_fields)] = (i, bucket)
            load[i] += 1

    for i in range(len(pool.actors)):
        submit(i)
    while in_flight:
        (ref,), _ = ray.wait(list(in_flight), num_returns=1)
        i, bucket = in_flight.pop(ref)
        load[i] -= 1
        try:
            res = ray.get(ref)
        except RayActorError as exc:
            if attempts[bucket.bucket_id] >= MAX_BUCKET_ATTEMPTS:
                yield _lost(bucket, f"its engine actor died {MAX_BUCKET_ATTEMPTS} times ({exc})")
                continue
            queue.appendleft(bucket)
            if _dead(pool.actors[i]):
                # Its other queued buckets fail the same way and come back here; they go to the new actor.
                load[i] = 0
                stale = [r for r, (j, _) in in_flight.items() if j == i]
                for r in stale:
                    queue.appendleft(in_flight.pop(r)[1])
                pool.replace(i)
            for j in range(len(pool.actors)):
                submit(j)
            continue
        if progress is not None:
            progress.update(len(bucket.items), res.output_tokens)
        yield res
        submit(i)


def _dead(actor: Any) -> bool:
    ray = _ray()
    try:
        ray.get(actor.info.remote(), timeout=30)
        return False
    except Exception:  # noqa: BLE001 - any failure to answer means it must be replaced
        return True


def _lost(bucket: Bucket, why: str) -> BucketResult:
    res = BucketResult(bucket.bucket_id, bucket.kind)
    res.errors = engine_errors(bucket.items, f"bucket {bucket.bucket_id}: {why}")
    return res


def ray_stage_functions(options: ExecutorOptions) -> dict[str, Any]:
    """The stages Ray takes over, as `Stages` field -> function: model loading and inference (ingest, prepare and
    the sink stay in the driver)."""

    def load(model_dir: Path, **engine_kwargs: Any) -> RayEnginePool:
        return RayEnginePool(model_dir, engine_kwargs, options)

    return {"load_llm": load, "infer": ray_infer}
