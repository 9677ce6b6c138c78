"""Per-bank CSV profiles: what detection cannot decide for a bank's export, written down once.

A profile is a TOML file (shipped in data/bank_profiles, more with --bank-profiles DIR) in the spirit of
hledger's CSV rules and bank2ynab's configs: a file-name pattern, and any of the encoding, the delimiter, the
lines before the header, whether there is a header, which column holds which role (a header name or a 1-based
position), the date format, the decimal mark and the currency. Whatever a profile leaves out is detected as
for any other file. A file matches the first profile (in file-name order) whose pattern it contains.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import tomllib
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "data" / "bank_profiles"
Role = Literal["date", "amount", "debit", "credit", "currency", "counterparty", "description", "account", "balance"]
ColumnRef = str | int


class BankProfile(BaseModel):
    """One bank export layout (a TOML file's content)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    filename: str = Field(description="regular expression searched in the file name")
    source: str | None = Field(default=None, description="where the layout was learnt")
    encoding: str | None = None
    delimiter: str | None = Field(default=None, min_length=1, max_length=1)
    skip_lines: int = Field(default=0, ge=0, description="lines before the header (or the first record)")
    header: bool = True
    columns: dict[Role, ColumnRef | list[ColumnRef]] = Field(default_factory=dict)
    date_format: str | None = None
    decimal_comma: bool | None = None
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")
    # shipped with the project: its file-name pattern is a guess at a bank's exports, so a file whose header lacks
    # a column it names is read by detection; a user's own profile (--bank-profiles) is held to what it names
    _shipped: bool = PrivateAttr(default=False)

    @property
    def shipped(self) -> bool:
        return self._shipped

    @field_validator("filename")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"filename is not a regular expression: {exc}") from exc
        return value

    def matches(self, source_file: str) -> bool:
        return re.search(self.filename, Path(source_file).name, re.IGNORECASE) is not None


def load_profiles(*dirs: Path) -> tuple[BankProfile, ...]:
    """Profiles of every *.toml in `dirs` (the user's first, so they win over the shipped ones)."""
    out = []
    for d in dirs:
        for path in sorted(Path(d).glob("*.toml")):
            try:
                profile = BankProfile.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
            except (tomllib.TOMLDecodeError, ValueError) as exc:
                raise ValueError(f"bank profile {path}: {exc}") from exc
            profile._shipped = Path(d).resolve() == SHIPPED_DIR
            out.append(profile)
    return tuple(out)


def profile_for(source_file: str, profiles: tuple[BankProfile, ...]) -> BankProfile | None:
    return next((p for p in profiles if p.matches(source_file)), None)
