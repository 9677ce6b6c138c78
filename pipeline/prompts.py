"""Versioned prompts for the extraction model.

Layout: shared instruction and compact schema first (identical across requests, so the
engine's prefix cache reuses it), the variable document or window facts last, then a
fixed answer marker after which the model emits compact JSON and EOS.
"""

from collections.abc import Mapping

PROMPT_VERSION = "doc-v1/win-v1"
ANSWER_MARKER = "### JSON:\n"

DOCUMENT_INSTRUCTION = (
    "### Extract as JSON: doc_type, issuer, counterparty, reference, date (YYYY-MM-DD),"
    " currency, amount (like 1234.50), account (no spaces); null if absent.\n"
    "### Document:\n"
)

WINDOW_INSTRUCTION = (
    "### Summarise the account window as JSON. net >= 0: net_inflow, else net_outflow;"
    " one flag per count above 0; risk low, medium, high for 0, 1, 2+ flags.\n"
    "### Window:\n"
)

# Order and labels of the facts a window prompt states (keys of pipeline.windows aggregates).
WINDOW_FACT_LABELS: tuple[tuple[str, str], ...] = (
    ("account", "account"),
    ("period_start", "from"),
    ("period_end", "to"),
    ("currency", "currency"),
    ("tx_count", "transactions"),
    ("credits", "credits"),
    ("debits", "debits"),
    ("net", "net"),
    ("large_cash_count", "large cash movements"),
    ("new_counterparty_count", "new counterparties"),
    ("structuring_count", "round amounts under threshold"),
    ("foreign_count", "foreign currency transactions"),
)


def render_document_prompt(document_text: str) -> str:
    """Prompt for one document; `document_text` comes from `pipeline.pdf_text.document_text`."""
    return f"{DOCUMENT_INSTRUCTION}{document_text.strip()}\n{ANSWER_MARKER}"


def render_window_prompt(facts: Mapping[str, object]) -> str:
    """Prompt for one account window; `facts` is one row of `pipeline.windows.window_facts`."""
    missing = [key for key, _ in WINDOW_FACT_LABELS if key not in facts]
    if missing:
        raise KeyError(f"window facts lack {missing}")
    body = "\n".join(f"{label}: {facts[key]}" for key, label in WINDOW_FACT_LABELS)
    return f"{WINDOW_INSTRUCTION}{body}\n{ANSWER_MARKER}"
