"""The real workload's chart: where each configuration's wall time went, with its documents per hour and fields
right, one bar per configuration of one bench run (only runs of the same bench compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The time split's lines (bench.real.time_split) drawn as a few parts; a line no part names is "other".
PARTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("OCR", "#ff7f0e", ("ingest: ocr",)),
    ("prefill steps", "#1f77b4", ("infer: prefill steps (forward)",)),
    ("decode steps", "#6baed6", ("infer: decode steps (forward)",)),
    ("sampling and grammar", "#9467bd", ("infer: sampling and grammar",)),
    ("peer engine (whole model part)", "#d62728", ("infer: peer engine (prefill, decode, grammar)",)),
    ("prompts, grounding, validation, staging", "#2ca02c",
     ("prompts and tokenisation", "infer: grounding, validation, staging")),
)
OTHER = ("other (startup, parsing, plan, model load, publish)", "#bdbdbd")


def parts_of(split: dict[str, float]) -> list[tuple[str, str, float]]:
    """(part, colour, seconds) of one run's time split; the parts sum to the split's total."""
    named = {line for _, _, lines in PARTS for line in lines}
    out = [(name, colour, sum(split.get(line, 0.0) for line in lines)) for name, colour, lines in PARTS]
    out.append((*OTHER, sum(v for k, v in split.items() if k not in named)))
    return out


def write_real_chart(results: dict[str, Any], out_dir: Path) -> Path | None:
    """`real.png` in `out_dir`: one stacked bar of wall seconds per configuration that ran; None if none did."""
    rows = [r for r in results["runs"] if r.get("time_split_s")]
    if not rows:
        return None
    # lazy: only charts need it
    import matplotlib

    matplotlib.use("Agg")
    # lazy: only charts need it
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 0.7 * len(rows) + 2.8))
    drawn: set[str] = set()
    for i, row in enumerate(rows):
        left = 0.0
        for name, colour, seconds in parts_of(row["time_split_s"]):
            if seconds <= 0:
                continue
            ax.barh(i, seconds, left=left, color=colour, label=None if name in drawn else name)
            drawn.add(name)
            left += seconds
        score = row.get("score") or {}
        ax.text(left, i, f"  {row['documents_per_hour']:,.0f} docs/h, {score.get('fields_right', 0)} / "
                         f"{score.get('fields_scored', 0)} fields", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("wall seconds")
    ax.margins(x=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, fontsize=8, frameon=False)
    ax.set_title(f"pipeline bench --workload real: {results['documents']} documents, one run per configuration")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "real.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
