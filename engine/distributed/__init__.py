"""Context parallelism: one sequence's KV cache and attention split over N ranks (zigzag ring attention for
prefill, LSE-merged attention for decode), served by `LLM(..., context_parallel_size=N)`.

Layout: block_manager.py (rank 0's view of every rank's blocks and where new ones go), plan.py (the per-step plan
rank 0 broadcasts and each rank's share of it), attention.py (ring and replicated attention), comm.py (the
process group), runner.py (one rank's step), worker.py (starting, attaching and serving ranks).
"""

__all__ = ["serve_rank"]


def serve_rank() -> None:
    """Ranks 1..N-1 of a process group the caller initialised: see engine.distributed.worker.serve_rank. (Imported
    on call, so `python -m engine.distributed.worker` does not find itself imported already.)"""
    from engine.distributed.worker import serve_rank as serve  # noqa: PLC0415

    serve()
