"""Document extraction: one model for every supported financial document type.

Every value is copied from the document text (dates rewritten to ISO, amounts to plain
decimal strings) so that exact-match accuracy is meaningful and no arithmetic is needed. The model writes them as
text; the documents dataset stores them typed (date32, decimal128(18, 2) in full units: schemas.arrow.Stored).
"""

from enum import Enum
from typing import Annotated

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from schemas.arrow import Stored

ISO_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
AMOUNT_PATTERN = r"^-?[0-9]{1,15}\.[0-9]{2}$"
CURRENCY_PATTERN = r"^[A-Z]{3}$"
ACCOUNT_PATTERN = r"^[A-Z0-9-]{4,34}$"


class DocType(str, Enum):
    """What data teams receive. The first five are the synthetic families the demo model is trained on; the rest
    came with real documents (schema 2.0). `other`: none of these; a document is never forced into a family."""

    INVOICE = "invoice"
    BANK_STATEMENT = "bank_statement"
    KYC_NOTICE = "kyc_notice"
    TRADE_CONFIRMATION = "trade_confirmation"
    RESEARCH_NOTE = "research_note"
    RECEIPT = "receipt"
    CREDIT_NOTE = "credit_note"
    UTILITY_BILL = "utility_bill"
    PAYSLIP = "payslip"
    FILING = "filing"
    OTHER = "other"


ShortText = Annotated[str, Field(min_length=1, max_length=80)]


class DocumentExtraction(BaseModel):
    """Fields extracted from one document; null where the document type has no such field.

    Field order is the order of keys in the model's JSON output (and in training targets).
    """

    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    doc_type: DocType = Field(description="document family")
    issuer: ShortText | None = Field(description="organisation that issued the document; null where none is named")
    counterparty: ShortText | None = Field(
        description="customer, account holder, client or covered company"
    )
    reference: Annotated[str, Field(min_length=1, max_length=40)] | None = Field(
        description="document number, statement/case/trade/report reference"
    )
    date: Annotated[str, Field(pattern=ISO_DATE_PATTERN), Stored(pa.date32())] | None = Field(
        description="document date, YYYY-MM-DD; null where the document prints none"
    )
    currency: Annotated[str, Field(pattern=CURRENCY_PATTERN)] | None = Field(
        description="ISO 4217 code of the amount"
    )
    amount: Annotated[str, Field(pattern=AMOUNT_PATTERN), Stored(pa.decimal128(18, 2))] | None = Field(
        description="headline amount as a plain decimal: invoice total, closing balance,"
        " net settlement, amount under review or price target"
    )
    account: Annotated[str, Field(pattern=ACCOUNT_PATTERN)] | None = Field(
        description="IBAN (no spaces) or account number the document refers to"
    )


DOCUMENT_FIELDS: tuple[str, ...] = tuple(DocumentExtraction.model_fields)
