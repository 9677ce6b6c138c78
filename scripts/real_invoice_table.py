"""Per-field accuracy table (Markdown) from `pipeline eval --gold DIR --json` reports.

    python scripts/real_invoice_table.py LABEL=REPORT.json [LABEL=REPORT.json ...] [--xml-only LABEL=REPORT.json]

`--xml-only` adds a column scored over the documents of that report read from embedded e-invoice XML.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.real_gold import SCORED_FIELDS, field_matches, load_gold_dir  # noqa: E402


def _scores(report: dict, ids: list[str]) -> dict[str, tuple[int, int]]:
    """Correct / total per field, re-scored from the report's outputs against its gold set."""
    gold = {d.id: d.gold for d in load_gold_dir(Path(report["eval_dir"]))}
    out = {}
    for name in SCORED_FIELDS:
        ok = 0
        for item_id in ids:
            try:
                pred = json.loads(report["outputs"][item_id])
            except (json.JSONDecodeError, TypeError):
                pred = {}
            ok += field_matches(name, pred.get(name), gold[item_id][name])
        out[name] = (ok, len(ids))
    return out


def main(argv: list[str]) -> int:
    columns = []
    xml = False
    for arg in argv:
        if arg == "--xml-only":
            xml = True
            continue
        label, path = arg.split("=", 1)
        report = json.loads(Path(path).read_text(encoding="utf-8"))
        ids = list(report["outputs"])
        if xml:
            ids = [i for i, m in report["extraction_method_by_item"].items() if m == "embedded_xml"]
            xml = False
        columns.append((label, _scores(report, ids)))
    print("| field | " + " | ".join(label for label, _ in columns) + " |")
    print("|---|" + "--:|" * len(columns))
    for name in SCORED_FIELDS:
        print(f"| {name} | " + " | ".join(f"{s[name][0]}/{s[name][1]}" for _, s in columns) + " |")
    totals = []
    for _, s in columns:
        ok, n = sum(v[0] for v in s.values()), sum(v[1] for v in s.values())
        totals.append(f"**{ok / n:.1%}** ({ok}/{n})")
    print("| all fields | " + " | ".join(totals) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
