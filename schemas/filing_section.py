"""A section of a long document summarised by the model from that section only (the filing_sections dataset)."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Point = Annotated[str, Field(min_length=1, max_length=160)]


class SectionSummary(BaseModel):
    """What one section says. Every number in it must be printed in the section (checked after decoding:
    pipeline.grounding.numbers)."""

    model_config = ConfigDict(extra="forbid")

    summary: Annotated[str, Field(min_length=1, max_length=400)] = Field(
        description="what the section says, in at most three sentences")
    key_points: Annotated[list[Point], Field(max_length=5)] = Field(
        description="its main points, one short item each (for risk factors: one item per risk)")
