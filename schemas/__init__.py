"""Pydantic output schemas and the Arrow schemas derived from them (one source of truth)."""

from schemas.account import AccountWindowSummary, Flag, RiskLevel, WindowClassification
from schemas.arrow import Stored, arrow_schema_for, arrow_values
from schemas.document import DocType, DocumentExtraction
from schemas.filing_facts import FACT_ARROW_SCHEMA
from schemas.filing_section import SectionSummary
from schemas.json_schema import constrained_json_schema, to_compact_json
from schemas.transactions import TRANSACTION_ARROW_SCHEMA

SCHEMA_VERSION = "3.0.0"  # 1.1: document date, amount and account decoded only from values the text prints;
# 1.2: documents carry extraction_method (embedded_xml | model) and grounded; 1.3: ocred_pages and ocr_engine;
# 2.0: document types receipt, credit_note, utility_bill, payslip, filing, other; issuer and date nullable;
# per-field confidence (field_confident) and needs_review; grounded means "taken from the labelled place";
# 2.1: documents carry text_read_fraction and route (engine | context_parallel | embedded_xml); 2.2: filings are
# read whole by sections (route "sections", form_type, sections_read), the filing_sections dataset, and filing
# facts from statement tables (method "table", label, confidence); 3.0: documents store date as date32 and amount
# as decimal128(18, 2) (were text; `pipeline migrate` casts older parts) and field_sources: each value's page, character
# span and printed characters, or its e-invoice XML element

__all__ = [
    "SCHEMA_VERSION",
    "AccountWindowSummary",
    "DocType",
    "DocumentExtraction",
    "FACT_ARROW_SCHEMA",
    "Flag",
    "RiskLevel",
    "SectionSummary",
    "TRANSACTION_ARROW_SCHEMA",
    "WindowClassification",
    "Stored",
    "arrow_schema_for",
    "arrow_values",
    "constrained_json_schema",
    "to_compact_json",
]
